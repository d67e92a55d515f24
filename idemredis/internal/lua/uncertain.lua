-- uncertain leaves the operation of the reconciler that holds token
-- uncertain (docs/CONTRACT.md §6): kept without expiry until an operator
-- resolves it, never due for a reconciler again; it stays in the running
-- index, which lists it. KEYS: 1 record, 2 due index. ARGV: 1 offset,
-- 2 token, 3 due member.
if not owned(KEYS[1], ARGV[2]) then
  return lost(KEYS[1])
end
redis.call('HSET', KEYS[1], 'st', 'uncertain', 'lu', 0, 'ra', 0)
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('PERSIST', KEYS[1])
return 1
