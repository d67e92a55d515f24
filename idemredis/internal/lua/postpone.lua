-- postpone ends the lease now and makes the operation due for a
-- reconciler after ARGV[3] ms. KEYS: 1 record, 2 due index. ARGV:
-- 1 offset, 2 token, 3 wait ms, 4 due member.
local r = owned(KEYS[1], ARGV[2], 'ex')
if not r then
  return lost(KEYS[1])
end
local now = clock(ARGV[1])
local due = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'lu', now, 'ra', due)
redis.call('ZADD', KEYS[2], due, ARGV[4])
keep(KEYS[1], tonumber(r[3]), now, now)
return 1
