-- due lists at most ARGV[2] members of a route's due index whose lease
-- ended and whose reconciler wait passed, oldest first, each followed by
-- the time it fell due. KEYS: 1 due
-- index. ARGV: 1 offset, 2 limit.
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', clock(ARGV[1]), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
