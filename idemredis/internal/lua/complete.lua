-- complete stores the response of the attempt that holds token.
-- KEYS: 1 record, 2 due index, 3 running index. ARGV: 1 offset, 2 token,
-- 3 state, 4 status, 5 header (the stored response: see decodeResponse), 6 body
-- (empty but in records of earlier versions), 7 due member, 8 running member.
local r = owned(KEYS[1], ARGV[2], 'ex')
if not r then
  return lost(KEYS[1])
end
redis.call('HSET', KEYS[1], 'st', ARGV[3], 'sc', ARGV[4], 'hd', ARGV[5], 'bd', ARGV[6], 'lu', 0, 'ra', 0)
redis.call('ZREM', KEYS[2], ARGV[7])
redis.call('ZREM', KEYS[3], ARGV[8])
keep(KEYS[1], tonumber(r[3]), 0, clock(ARGV[1]))
return 1
