-- extend makes the lease end ARGV[3] ms from now, and the expiry at least
-- ARGV[4] ms after that. KEYS: 1 record, 2 due index. ARGV: 1 offset,
-- 2 token, 3 lease ms, 4 margin ms, 5 due member.
local r = owned(KEYS[1], ARGV[2], 'ex', 'ra')
if not r then
  return lost(KEYS[1])
end
local now = clock(ARGV[1])
local nlu = now + tonumber(ARGV[3])
local nex = math.max(tonumber(r[3]), nlu + tonumber(ARGV[4]))
redis.call('HSET', KEYS[1], 'lu', nlu, 'ex', nex)
redis.call('ZADD', KEYS[2], math.max(nlu, tonumber(r[4])), ARGV[5])
keep(KEYS[1], nex, nlu, now)
return 1
