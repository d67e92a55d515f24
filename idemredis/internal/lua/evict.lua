-- evict deletes a record, and its members of the indexes, unless its lease
-- is live and force is not '1'; it answers 'none', 'live' or 'deleted',
-- Redis's clock, and the record's fields as read (see read.lua).
-- KEYS: 1 record, 2 due index, 3 running index. ARGV: 1 offset, 2 force,
-- 3 due member, 4 running member, 5.. the fields.
local now = clock(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'none', now, false}
end
local fields = redis.call('HMGET', KEYS[1], unpack(ARGV, 5))
local r = redis.call('HMGET', KEYS[1], 'st', 'lu')
if r[1] == 'running' and tonumber(r[2]) > now and ARGV[2] ~= '1' then
  return {'live', now, fields}
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[4])
return {'deleted', now, fields}
