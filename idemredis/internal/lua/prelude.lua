-- The clock of every script: Redis's TIME in milliseconds, plus the
-- store's test offset (ARGV[1], 0 outside tests).
local function clock(offset)
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(offset)
end

-- keep makes the record key live until the later of its expiry and its
-- lease's end (at least 1 ms): Redis deletes it then, never while the
-- record answers or its lease is live.
local function keep(key, ex, lu, now)
  redis.call('PEXPIRE', key, math.max(math.max(ex, lu) - now, 1))
end

-- owned reads the fields of the record at key, or nil unless it is running
-- under token.
local function owned(key, token, ...)
  local r = redis.call('HMGET', key, 'st', 'tok', ...)
  if r[1] ~= 'running' or r[2] ~= token then
    return nil
  end
  return r
end

-- lost is what a fenced script answers when its token is stale: 0, or -1
-- when the record is gone (evicted, or expired), which makes the store
-- read maxmemory-policy again.
local function lost(key)
  if redis.call('EXISTS', key) == 0 then
    return -1
  end
  return 0
end
