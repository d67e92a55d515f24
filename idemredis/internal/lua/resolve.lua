-- resolve settles an uncertain operation as an operator said, checking
-- the state as it writes: applied (ARGV[3] '1'), with the response every
-- later claim replays, kept at least ARGV[5] ms from now; or not applied:
-- expired now, so the next claim runs afresh, and kept ARGV[5] ms to show
-- who resolved it. A new token fences out anything that held the old one.
-- KEYS: 1 record, 2 running index. ARGV: 1 offset, 2 new token, 3 applied,
-- 4 status, 5 ms to keep, 6 header (the stored response), 7 by, 8 why,
-- 9 running member. Answers false without a record, {'not', state} for a
-- record that is not uncertain, else {'ok', tenant, principal, route, key,
-- attempt, created, now}.
local r = redis.call('HMGET', KEYS[1], 'st', 'ex', 'tn', 'pr', 'rt', 'ky', 'att', 'ca')
if not r[1] then
  return false
end
if r[1] ~= 'uncertain' then
  return {'not', r[1]}
end
local now = clock(ARGV[1])
if ARGV[3] == '1' then
  local ex = math.max(tonumber(r[2]), now + tonumber(ARGV[5]))
  redis.call('HSET', KEYS[1], 'st', 'done', 'tok', ARGV[2], 'sc', ARGV[4], 'hd', ARGV[6], 'bd', '', 'ex', ex,
    'rb', ARGV[7], 'rr', ARGV[8], 'rw', now)
  keep(KEYS[1], ex, 0, now)
else
  redis.call('HSET', KEYS[1], 'st', 'not-applied', 'tok', ARGV[2], 'ex', now, 'rb', ARGV[7], 'rr', ARGV[8], 'rw', now)
  redis.call('PEXPIRE', KEYS[1], math.max(tonumber(ARGV[5]), 1))
end
redis.call('ZREM', KEYS[2], ARGV[9])
return {'ok', r[3] or '', r[4] or '', r[5] or '', r[6] or '', tonumber(r[7]) or 0, tonumber(r[8]) or 0, now}
