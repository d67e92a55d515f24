-- abort releases the key of a refused first attempt that recorded no
-- recovery point (ARGV[3] '1': refused), else ends the lease now.
-- KEYS: 1 record, 2 due index, 3 running index. ARGV: 1 offset, 2 token,
-- 3 refused, 4 due member, 5 running member.
local r = owned(KEYS[1], ARGV[2], 'att', 'rp', 'ra', 'ex')
if not r then
  return lost(KEYS[1])
end
if ARGV[3] == '1' and r[3] == '1' and not r[4] then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[4])
  redis.call('ZREM', KEYS[3], ARGV[5])
  return 1
end
local now = clock(ARGV[1])
redis.call('HSET', KEYS[1], 'lu', now)
redis.call('ZADD', KEYS[2], math.max(now, tonumber(r[5])), ARGV[4])
keep(KEYS[1], tonumber(r[6]), now, now)
return 1
