-- load.lua: what a process holding a host needs to lease its URLs.
-- KEYS: 1 queue, 2 deferred, 3 items, 4 counts, 5 results
-- ARGV: 1 now (ms), 2 limit, 3 promote limit
-- Deferred URLs due by now are moved to the queue first. Returns
-- {queued, next due or -1, hash1, seq1, entry1, hash2, ...} for the first
-- limit URLs of the queue, oldest first. A refresh's entry (refresh.lua's
-- REFRESH_ENTRY) is given as that entry followed by the stored result it
-- refreshes, from which the Item is made.
local q, d, u, c = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local due = redis.call('ZRANGEBYSCORE', d, '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, h in ipairs(due) do
  redis.call('ZREM', d, h)
  redis.call('HINCRBY', c, 'deferred', -1)
  local seq = redis.call('HINCRBY', c, 'seq', 1)
  redis.call('ZADD', q, seq, h)
  redis.call('HINCRBY', c, 'queued', 1)
end
local out = {redis.call('ZCARD', q), -1}
local nextDue = redis.call('ZRANGE', d, 0, 0, 'WITHSCORES')
if #nextDue == 2 then out[2] = tonumber(nextDue[2]) end
local head = redis.call('ZRANGE', q, 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
for i = 1, #head, 2 do
  local entry = redis.call('HGET', u, head[i])
  if entry == 'r' and KEYS[5] then entry = entry .. (redis.call('HGET', KEYS[5], head[i]) or '') end
  out[#out + 1] = head[i]
  out[#out + 1] = tonumber(head[i + 1])
  out[#out + 1] = entry or ''
end
return out
