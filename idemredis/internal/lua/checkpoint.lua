-- checkpoint records a recovery point: ARGV[3] point, ARGV[4] data when
-- ARGV[5] is '1' (else none). KEYS: 1 record. ARGV: 1 offset, 2 token.
if not owned(KEYS[1], ARGV[2]) then
  return lost(KEYS[1])
end
redis.call('HSET', KEYS[1], 'rp', ARGV[3])
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'rd', ARGV[4])
else
  redis.call('HDEL', KEYS[1], 'rd')
end
return 1
