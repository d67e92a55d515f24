-- prune drops the index members of a record that Redis deleted at its
-- expiry. KEYS: 1 record, 2 due index, 3 running index. ARGV: 1 due
-- member, 2 running member.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[2])
return 1
