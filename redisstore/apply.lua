-- apply.lua: one batch of frontier operations on one host, atomically.
-- KEYS: 1 queue (zset hash->seq), 2 deferred (zset hash->due ms),
--       3 items (hash hash->entry), 4 seen (set), 5 results (hash), 6 counts (hash),
--       7 warc (hash hash->"FILE OFFSET")
-- ARGV: a flat list of operations, each a code and its fields:
--   A hash entry               queue if never seen
--   R hash entry               queue again even if seen, unless queued or deferred
--   C hash record status class complete: drop from the queue, store the result
--   D hash entry due           defer: move from the queue to the deferred set
--   P now limit                promote up to limit deferred URLs due by now
--   W hash placement           where a completed URL's WARC records are
-- Returns {added, completed, deferred, promoted}.
local q, d, u, seen, r, c, w = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local added, completed, deferred, promoted = 0, 0, 0, 0

local function enqueue(h, entry)
  local seq = redis.call('HINCRBY', c, 'seq', 1)
  redis.call('ZADD', q, seq, h)
  if entry then redis.call('HSET', u, h, entry) end
  redis.call('HINCRBY', c, 'queued', 1)
end

-- The header of a stored result: a flag byte, 16 bytes of hash, a 2-byte
-- status, a length byte and the error class (storage's resultHead).
local function uncount(rec)
  local flag = string.byte(rec, 1)
  local status = string.byte(rec, 18) * 256 + string.byte(rec, 19)
  local n = string.byte(rec, 20)
  local class = string.sub(rec, 21, 20 + n)
  redis.call('HINCRBY', c, 's:' .. status, -1)
  if flag == 70 then -- 'F'
    redis.call('HINCRBY', c, 'failed', -1)
    redis.call('HINCRBY', c, 'f:' .. class, -1)
  else
    redis.call('HINCRBY', c, 'fetched', -1)
  end
end

local i = 1
while i <= #ARGV do
  local op = ARGV[i]
  if op == 'A' then
    local h, entry = ARGV[i + 1], ARGV[i + 2]
    if redis.call('SADD', seen, h) == 1 then
      redis.call('HINCRBY', c, 'seen', 1)
      enqueue(h, entry)
      added = added + 1
    end
    i = i + 3
  elseif op == 'R' then
    local h, entry = ARGV[i + 1], ARGV[i + 2]
    if redis.call('SADD', seen, h) == 1 then redis.call('HINCRBY', c, 'seen', 1) end
    if not redis.call('ZSCORE', q, h) and not redis.call('ZSCORE', d, h) then
      enqueue(h, entry)
      added = added + 1
    end
    i = i + 3
  elseif op == 'C' then
    local h, rec, status, class = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
    if redis.call('ZREM', q, h) == 1 then
      redis.call('HDEL', u, h)
      redis.call('HINCRBY', c, 'queued', -1)
      local prev = redis.call('HGET', r, h)
      if prev then uncount(prev) end
      redis.call('HSET', r, h, rec)
      redis.call('HINCRBY', c, 's:' .. status, 1)
      if class == '' then
        redis.call('HINCRBY', c, 'fetched', 1)
      else
        redis.call('HINCRBY', c, 'failed', 1)
        redis.call('HINCRBY', c, 'f:' .. class, 1)
      end
      completed = completed + 1
    end
    i = i + 5
  elseif op == 'D' then
    local h, entry, due = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    if redis.call('ZREM', q, h) == 1 then
      redis.call('ZADD', d, due, h)
      redis.call('HSET', u, h, entry)
      redis.call('HINCRBY', c, 'queued', -1)
      redis.call('HINCRBY', c, 'deferred', 1)
      deferred = deferred + 1
    end
    i = i + 4
  elseif op == 'P' then
    local due = redis.call('ZRANGEBYSCORE', d, '-inf', ARGV[i + 1], 'LIMIT', 0, tonumber(ARGV[i + 2]))
    for _, h in ipairs(due) do
      redis.call('ZREM', d, h)
      redis.call('HINCRBY', c, 'deferred', -1)
      enqueue(h, nil)
      promoted = promoted + 1
    end
    i = i + 3
  elseif op == 'W' then
    redis.call('HSET', w, ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  else
    return redis.error_reply('apply.lua: unknown operation ' .. tostring(op))
  end
end
return {added, completed, deferred, promoted}
