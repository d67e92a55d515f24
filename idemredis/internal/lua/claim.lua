-- claim judges the record of a scope and claims it, or takes over its
-- ended lease, in one step (docs/CONTRACT.md §5, §10). Its arguments are
-- named once, here and in ClaimArgs (claim.go), in the same order.
-- recordAlg is the record's digest algorithm as the caller knows it after
-- a first run answered 'alg', recordDigest the request's digest by it,
-- anyDigest '1' when the caller does not know that algorithm (any digest
-- matches). touch '1' says the caller WAITs for replicas: a replay then
-- rewrites the record's expiry (the same instant), a write whose WAIT
-- covers the completion it replays, whichever connection wrote that.
local record, dueIndex, running = KEYS[1], KEYS[2], KEYS[3]
local offset, token, alg, digest, lease, retention, dueMember, runMember, tenant, principal, route, key,
  request, recordAlg, recordDigest, anyDigest, touch = unpack(ARGV)
local now = clock(offset)
local r = redis.call('HMGET', record, 'st', 'ex', 'lu', 'fa', 'fp', 'att', 'rp', 'rd', 'sc', 'hd', 'bd')
local st = r[1]
if st then
  local ex, lu = tonumber(r[2]), tonumber(r[3])
  local live = st == 'running' and lu > now
  if ex > now or live or st == 'uncertain' then
    local match
    if r[4] == alg then
      match = r[5] == digest
    elseif r[4] == recordAlg then
      match = anyDigest == '1' or r[5] == recordDigest
    else
      return {'alg', r[4]}
    end
    if not match then
      return {'mismatch'}
    end
    if st == 'done' then
      if touch == '1' then
        keep(record, ex, 0, now)
      end
      return {'replay', r[9], r[10], r[11], ex}
    elseif st == 'unavailable' then
      return {'unavailable'}
    elseif st == 'uncertain' then
      return {'uncertain'}
    elseif live then
      return {'inflight', lu - now}
    end
    local att = tonumber(r[6]) + 1
    local nlu = now + tonumber(lease)
    local nex = math.max(ex, now + tonumber(retention))
    redis.call('HSET', record, 'tok', token, 'att', att, 'lu', nlu, 'ex', nex, 'ra', 0)
    redis.call('ZADD', dueIndex, nlu, dueMember)
    keep(record, nex, nlu, now)
    return {'claimed', att, r[7] or false, r[8] or false}
  end
end
local nlu = now + tonumber(lease)
local nex = now + tonumber(retention)
redis.call('DEL', record)
redis.call('HSET', record, 'st', 'running', 'tok', token, 'att', 1, 'lu', nlu, 'ra', 0, 'ca', now, 'ex', nex,
  'fa', alg, 'fp', digest, 'rq', request, 'tn', tenant, 'pr', principal, 'rt', route, 'ky', key)
redis.call('ZADD', dueIndex, nlu, dueMember)
redis.call('ZADD', running, now, runMember)
keep(record, nex, nlu, now)
return {'claimed', 1, false, false}
