-- apply.lua: one batch of frontier operations on one host, atomically.
-- KEYS: 1 queue (zset hash->seq), 2 deferred (zset hash->due ms),
--       3 items (hash hash->entry), 4 seen (set), 5 results (hash), 6 counts (hash),
--       7 warc (hash hash->"FILE OFFSET"), 8 lease (lease.lua's hash),
--       9 fetched (zset hash->fetch ms of each stored page; refresh.lua),
--       10 robots (string), 11 cases (list)
-- ARGV: a flat list of operations, each a code and its fields:
--   F token                    fence the operations after it that settle
--                              the host's URLs or records (C, D, P, W, K,
--                              X): they are
--                              applied only while token is the host's
--                              lease token (lease.lua), refused and
--                              counted otherwise; '' lifts the fence
--   A hash entry               queue if never seen
--   R hash entry               queue again even if seen, unless queued or deferred
--   E hash entry               R, only while the URL's stored result is a
--                              failure (another process may have retried it)
--   H pages                    the host's pages requested for
--                              --max-pages-per-host: never lowered
--   C hash record status class complete: drop from the queue, store the result
--   D hash entry due           defer: move from the queue to the deferred set
--   P now limit                promote up to limit deferred URLs due by now
--   W hash placement           where a completed URL's WARC records are
--   K rules expiry             the host's robots.txt rules, cached for
--                              expiry ms
--   X case                     append one of the host's cases (JSON)
--   T hash fetched             the page a C of this batch stored was fetched
--                              at fetched (ms): indexed for refreshes (a
--                              failure stored by a C leaves the index)
-- A/R queue URLs whoever sends them: a process that lost the host still
-- found its links.
-- Returns {added, completed, deferred, promoted, refused, the host's
-- current lease token (0 for none)}.
local q, d, u, seen, r, c, w = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local added, completed, deferred, promoted, refused = 0, 0, 0, 0, 0
local current = nil
if KEYS[8] then current = redis.call('HGET', KEYS[8], 'token') end
local fenced = true -- whether the settling operations may be applied
local stored = {} -- hashes whose result a C of this batch stored
local indexed = {} -- of those, the pages a T indexed
local gone = {} -- hashes a C or D of this batch took out of the queue

-- The counters change in memory and are written once at the end: one
-- HINCRBY per counter a batch moves, not one per URL.
local delta = {}
local function count(field, n) delta[field] = (delta[field] or 0) + n end
local seq = nil
local function nextSeq()
  if not seq then seq = tonumber(redis.call('HGET', c, 'seq') or '0') end
  seq = seq + 1
  return seq
end

local items = {}
local function enqueue(h, entry)
  redis.call('ZADD', q, nextSeq(), h)
  gone[h] = nil
  if entry then
    items[#items + 1] = h
    items[#items + 1] = entry
  end
  count('queued', 1)
end

-- queueAgain queues a seen URL unless it is queued or deferred already.
local function queueAgain(h, entry)
  if not redis.call('ZSCORE', q, h) and not redis.call('ZSCORE', d, h) then
    enqueue(h, entry)
    added = added + 1
  end
end

-- The header of a stored result: a flag byte, 16 bytes of hash, a 2-byte
-- status, a length byte and the error class (storage's resultHead).
local function uncount(rec)
  local flag = string.byte(rec, 1)
  local status = string.byte(rec, 18) * 256 + string.byte(rec, 19)
  local n = string.byte(rec, 20)
  local class = string.sub(rec, 21, 20 + n)
  count('s:' .. status, -1)
  if flag == 70 then -- 'F'
    count('failed', -1)
    count('f:' .. class, -1)
  else
    count('fetched', -1)
  end
end

local i = 1
while i <= #ARGV do
  local op = ARGV[i]
  local settles = ({C = 5, D = 4, P = 3, W = 3, K = 3, X = 2})[op]
  if not fenced and settles then
    refused = refused + 1
    i = i + settles
  elseif op == 'F' then
    fenced = ARGV[i + 1] == '' or ARGV[i + 1] == current
    i = i + 2
  elseif op == 'A' then
    local h, entry = ARGV[i + 1], ARGV[i + 2]
    if redis.call('SADD', seen, h) == 1 then
      count('seen', 1)
      enqueue(h, entry)
      added = added + 1
    end
    i = i + 3
  elseif op == 'R' then
    local h = ARGV[i + 1]
    if redis.call('SADD', seen, h) == 1 then count('seen', 1) end
    queueAgain(h, ARGV[i + 2])
    i = i + 3
  elseif op == 'E' then
    local h = ARGV[i + 1]
    local prev = redis.call('HGET', r, h)
    if prev and string.byte(prev, 1) == 70 then queueAgain(h, ARGV[i + 2]) end -- 'F'
    i = i + 3
  elseif op == 'H' then
    local n = tonumber(ARGV[i + 1])
    if n > tonumber(redis.call('HGET', c, 'pages') or '-1') then redis.call('HSET', c, 'pages', n) end
    i = i + 2
  elseif op == 'C' then
    local h, rec, status, class = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
    if redis.call('ZREM', q, h) == 1 then
      redis.call('HDEL', u, h)
      gone[h] = true
      count('queued', -1)
      -- Most results are a URL's first: stored in one command.
      if redis.call('HSETNX', r, h, rec) == 0 then
        uncount(redis.call('HGET', r, h))
        redis.call('HSET', r, h, rec)
      end
      stored[h] = true
      count('s:' .. status, 1)
      if class == '' then
        count('fetched', 1)
      else
        count('failed', 1)
        count('f:' .. class, 1)
      end
      completed = completed + 1
    end
    i = i + 5
  elseif op == 'D' then
    local h, entry, due = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    if redis.call('ZREM', q, h) == 1 then
      redis.call('ZADD', d, due, h)
      redis.call('HSET', u, h, entry)
      gone[h] = true
      count('queued', -1)
      count('deferred', 1)
      deferred = deferred + 1
    end
    i = i + 4
  elseif op == 'P' then
    local due = redis.call('ZRANGEBYSCORE', d, '-inf', ARGV[i + 1], 'LIMIT', 0, tonumber(ARGV[i + 2]))
    for _, h in ipairs(due) do
      redis.call('ZREM', d, h)
      count('deferred', -1)
      enqueue(h, nil)
      promoted = promoted + 1
    end
    i = i + 3
  elseif op == 'T' then
    if stored[ARGV[i + 1]] and KEYS[9] then
      redis.call('ZADD', KEYS[9], ARGV[i + 2], ARGV[i + 1])
      indexed[ARGV[i + 1]] = true
    end
    i = i + 3
  elseif op == 'W' then
    redis.call('HSET', w, ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  elseif op == 'K' then
    redis.call('SET', KEYS[10], ARGV[i + 1], 'PX', ARGV[i + 2])
    i = i + 3
  elseif op == 'X' then
    redis.call('RPUSH', KEYS[11], ARGV[i + 1])
    i = i + 2
  else
    return redis.error_reply('apply.lua: unknown operation ' .. tostring(op))
  end
end
-- A stored result no T indexed (a failure) leaves the refresh index.
if KEYS[9] then
  for h in pairs(stored) do
    if not indexed[h] then redis.call('ZREM', KEYS[9], h) end
  end
end
-- A URL completed or deferred in the batch that queued it had its entry
-- written by neither: items holds only the entries still wanted.
if #items > 0 then
  local keep = {}
  for j = 1, #items, 2 do
    if not gone[items[j]] then
      keep[#keep + 1] = items[j]
      keep[#keep + 1] = items[j + 1]
    end
  end
  -- In slices: unpack is bounded by Lua's stack.
  for j = 1, #keep, 400 do
    redis.call('HSET', u, unpack(keep, j, math.min(j + 399, #keep)))
  end
end
if seq then redis.call('HSET', c, 'seq', seq) end
for field, n in pairs(delta) do
  if n ~= 0 then redis.call('HINCRBY', c, field, n) end
end
return {added, completed, deferred, promoted, refused, tonumber(current or '0')}
