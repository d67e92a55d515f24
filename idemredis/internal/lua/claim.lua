-- claim judges the record of a scope and claims it, or takes over its
-- ended lease, in one step (docs/CONTRACT.md §5, §10).
-- KEYS: 1 record, 2 the route's due index, 3 the bucket's running index.
-- ARGV: 1 offset, 2 token, 3 digest algorithm, 4 digest, 5 lease ms,
-- 6 retention ms, 7 due member (scope), 8 running member, 9 tenant,
-- 10 principal, 11 route, 12 key, 13 request, 14 the record's algorithm
-- as the caller knows it, 15 the request's digest by it, 16 '1' when the
-- caller does not know that algorithm (any digest matches), 17 '1' when
-- the caller WAITs for replicas: a replay then rewrites the record's
-- expiry (the same instant), a write whose WAIT covers the completion it
-- replays, whichever connection wrote that.
local now = clock(ARGV[1])
local r = redis.call('HMGET', KEYS[1], 'st', 'ex', 'lu', 'fa', 'fp', 'att', 'rp', 'rd', 'sc', 'hd', 'bd')
local st = r[1]
if st then
  local ex, lu = tonumber(r[2]), tonumber(r[3])
  local live = st == 'running' and lu > now
  if ex > now or live then
    local match
    if r[4] == ARGV[3] then
      match = r[5] == ARGV[4]
    elseif r[4] == ARGV[14] then
      match = ARGV[16] == '1' or r[5] == ARGV[15]
    else
      return {'alg', r[4]}
    end
    if not match then
      return {'mismatch'}
    end
    if st == 'done' then
      if ARGV[17] == '1' then
        keep(KEYS[1], ex, 0, now)
      end
      return {'replay', r[9], r[10], r[11]}
    elseif st == 'unavailable' then
      return {'unavailable'}
    elseif live then
      return {'inflight', lu - now}
    end
    local att = tonumber(r[6]) + 1
    local nlu = now + tonumber(ARGV[5])
    local nex = math.max(ex, now + tonumber(ARGV[6]))
    redis.call('HSET', KEYS[1], 'tok', ARGV[2], 'att', att, 'lu', nlu, 'ex', nex, 'ra', 0)
    redis.call('ZADD', KEYS[2], nlu, ARGV[7])
    keep(KEYS[1], nex, nlu, now)
    return {'claimed', att, r[7] or false, r[8] or false}
  end
end
local nlu = now + tonumber(ARGV[5])
local nex = now + tonumber(ARGV[6])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'st', 'running', 'tok', ARGV[2], 'att', 1, 'lu', nlu, 'ra', 0, 'ca', now, 'ex', nex,
  'fa', ARGV[3], 'fp', ARGV[4], 'rq', ARGV[13], 'tn', ARGV[9], 'pr', ARGV[10], 'rt', ARGV[11], 'ky', ARGV[12])
redis.call('ZADD', KEYS[2], nlu, ARGV[7])
redis.call('ZADD', KEYS[3], now, ARGV[8])
keep(KEYS[1], nex, nlu, now)
return {'claimed', 1, false, false}
