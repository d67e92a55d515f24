-- free deletes the record of an operation a reconciler found did not
-- happen. KEYS: 1 record, 2 due index, 3 running index. ARGV: 1 offset,
-- 2 token, 3 due member, 4 running member.
if not owned(KEYS[1], ARGV[2]) then
  return lost(KEYS[1])
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[4])
return 1
