-- take takes an abandoned operation over for a reconciler: running, lease
-- ended, due, within retention; else it repairs or drops the member of
-- the due index. KEYS: 1 record, 2 due index. ARGV: 1 offset, 2 token,
-- 3 lease ms, 4 due member.
local r = redis.call('HMGET', KEYS[1], 'st', 'lu', 'ra', 'ex', 'att', 'rp', 'rd', 'rq', 'ca', 'tn', 'pr', 'rt', 'ky')
local now = clock(ARGV[1])
if r[1] ~= 'running' or tonumber(r[4]) <= now then
  redis.call('ZREM', KEYS[2], ARGV[4])
  return false
end
local lu, ra = tonumber(r[2]), tonumber(r[3])
if lu > now or ra > now then
  redis.call('ZADD', KEYS[2], math.max(lu, ra), ARGV[4])
  return false
end
local att = tonumber(r[5]) + 1
local nlu = now + tonumber(ARGV[3])
local nex = math.max(tonumber(r[4]), nlu + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'tok', ARGV[2], 'att', att, 'lu', nlu, 'ra', 0, 'ex', nex)
redis.call('ZADD', KEYS[2], nlu, ARGV[4])
keep(KEYS[1], nex, nlu, now)
return {att, r[6] or false, r[7] or false, r[8] or '', now - tonumber(r[9]), r[10], r[11], r[12], r[13]}
