-- refresh.lua: the refresh lane of a fleet (crawl's --recrawl-after).
-- A host's stored pages are indexed by fetch time in bw:{H}:f (apply.lua's
-- T), and each shard lists its hosts in bw:{sN}:stale under at most their
-- oldest page's fetch time, so that a pass looks only at the hosts that
-- have a page older than its cutoff, not at every host.
-- ARGV[1] is the operation:
--   stage cutoff limit    KEYS: 1 fetched, 2 queue, 3 deferred, 4 items,
--                         5 counts. Queues up to limit pages of the host
--                         fetched before cutoff (ms), oldest first, each
--                         taken out of fetched, so that no page is staged
--                         twice; a page queued or deferred already is only
--                         taken out. A staged page's entry is REFRESH_ENTRY:
--                         load.lua hands out its stored result instead, from
--                         which the refresh's Item is made. Its score is
--                         REFRESH_BASE + seq, after every new URL of the
--                         host. Returns {staged, the oldest fetch time left
--                         or -1}.
--   take cutoff limit lease
--                         KEYS: 1 stale. Takes up to limit hosts listed
--                         before cutoff and lists them at until (the
--                         server's now + lease ms), so that no other pass
--                         takes them meanwhile. Returns {until, host...}.
--   put until host next...
--                         KEYS: 1 stale. Lists each host taken at until
--                         again: at next, its oldest page left, when that
--                         is lower than what it is listed at (a writer
--                         may have listed it lower since); a host with
--                         no page left (-1) is forgotten unless it is
--                         listed other than at until.
local REFRESH_BASE = 1125899906842624 -- 2^50: refreshBase
local REFRESH_ENTRY = 'r'
local op = ARGV[1]

if op == 'stage' then
  local f, q, d, u, c = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
  local pages = redis.call('ZRANGEBYSCORE', f, '-inf', '(' .. ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
  local staged, seq = 0, nil
  for _, h in ipairs(pages) do
    redis.call('ZREM', f, h)
    if not redis.call('ZSCORE', q, h) and not redis.call('ZSCORE', d, h) then
      if not seq then seq = tonumber(redis.call('HGET', c, 'seq') or '0') end
      seq = seq + 1
      redis.call('ZADD', q, REFRESH_BASE + seq, h)
      redis.call('HSET', u, h, REFRESH_ENTRY)
      staged = staged + 1
    end
  end
  if staged > 0 then
    redis.call('HSET', c, 'seq', seq)
    redis.call('HINCRBY', c, 'queued', staged)
  end
  local oldest = redis.call('ZRANGE', f, 0, 0, 'WITHSCORES')
  local left = -1
  if #oldest == 2 then left = tonumber(oldest[2]) end
  return {staged, left}
elseif op == 'take' then
  local t = redis.call('TIME')
  local untilMS = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[4])
  local hosts = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
  local out = {string.format('%d', untilMS)}
  for _, h in ipairs(hosts) do
    redis.call('ZADD', KEYS[1], untilMS, h)
    out[#out + 1] = h
  end
  return out
elseif op == 'put' then
  local untilMS = tonumber(ARGV[2])
  for i = 3, #ARGV - 1, 2 do
    local h, left = ARGV[i], tonumber(ARGV[i + 1])
    if left >= 0 then
      redis.call('ZADD', KEYS[1], 'LT', left, h)
    elseif tonumber(redis.call('ZSCORE', KEYS[1], h) or '-1') == untilMS then
      redis.call('ZREM', KEYS[1], h)
    end
  end
  return 0
end
return redis.error_reply('refresh.lua: unknown operation ' .. tostring(op))
