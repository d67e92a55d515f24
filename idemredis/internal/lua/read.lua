-- read returns Redis's clock and the fields of a record (see operator.go's
-- recordFields), nil for those it lacks: false for a record that is not.
-- KEYS: 1 record. ARGV: 1 offset, 2.. the fields.
local now = clock(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {now, false}
end
return {now, redis.call('HMGET', KEYS[1], unpack(ARGV, 2))}
