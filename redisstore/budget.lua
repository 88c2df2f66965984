-- budget.lua: the fleet's --max-pages, one budget for every process that
-- crawls the store at once. A process takes pages from it in small chunks
-- and gives back what it did not use when it stops, so the fleet requests
-- at most the limit between them, and a killed process loses at most its
-- last chunk.
--
-- The budget belongs to a fleet run: the processes crawling the store
-- together. A process joining when no other member has a live heartbeat
-- (proc.lua) starts a new run with the whole limit, as a file's next run
-- does; one joining a live run shares what is left of it.
--
-- KEYS[1] the budget hash: limit, used, m:ID (the member's run instance),
--         t:ID (the pages it took)
-- KEYS[2] the procs hash (proc.lua)
-- ARGV[1] the operation, ARGV[2] fleet ID, ARGV[3] its instance:
--   join limit stale  drop members whose heartbeat is older than stale ms
--                     (or of another instance); with no live member left,
--                     a new run of limit pages. Returns {limit, used}:
--                     the run's, which may differ from the one asked
--   take want         up to want pages, fewer as the budget runs out (a
--                     share of what is left per member), 0 when it has.
--                     Returns {taken, limit, used}
--   leave unused      gives unused pages back (never more than were
--                     taken) and leaves the run. Returns used
local k, procs, op, id, instance = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function liveBeat(member, inst, stale)
  local raw = redis.call('HGET', procs, member)
  if not raw then return false end
  local ok, beat = pcall(cjson.decode, raw)
  if not ok or type(beat) ~= 'table' or beat.instance ~= inst then return false end
  return now - tonumber(beat.server_ms or 0) < stale
end

local function members()
  local n = 0
  for _, f in ipairs(redis.call('HKEYS', k)) do
    if string.sub(f, 1, 2) == 'm:' then n = n + 1 end
  end
  return n
end

if op == 'join' then
  local limit, stale = tonumber(ARGV[4]), tonumber(ARGV[5])
  local live = false
  local all = redis.call('HGETALL', k)
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if string.sub(f, 1, 2) == 'm:' then
      local member = string.sub(f, 3)
      if member ~= id and liveBeat(member, v, stale) then
        live = true
      else
        redis.call('HDEL', k, f, 't:' .. member)
      end
    end
  end
  if not live or not redis.call('HGET', k, 'limit') then
    redis.call('DEL', k)
    redis.call('HSET', k, 'limit', limit, 'used', 0)
  end
  redis.call('HSET', k, 'm:' .. id, instance, 't:' .. id, 0)
  return {tonumber(redis.call('HGET', k, 'limit')), tonumber(redis.call('HGET', k, 'used'))}
elseif op == 'take' then
  local want = tonumber(ARGV[4])
  local limit = tonumber(redis.call('HGET', k, 'limit') or 0)
  local used = tonumber(redis.call('HGET', k, 'used') or 0)
  if redis.call('HGET', k, 'm:' .. id) ~= instance then
    -- Dropped while stalled past its heartbeat: it takes part again.
    redis.call('HSET', k, 'm:' .. id, instance, 't:' .. id, 0)
  end
  local left = limit - used
  local n = 0
  if left > 0 then
    n = math.min(want, math.max(1, math.floor(left / (2 * members()))))
    redis.call('HINCRBY', k, 'used', n)
    redis.call('HINCRBY', k, 't:' .. id, n)
  end
  return {n, limit, used + n}
elseif op == 'leave' then
  local unused = tonumber(ARGV[4])
  if redis.call('HGET', k, 'm:' .. id) == instance then
    local n = math.min(unused, tonumber(redis.call('HGET', k, 't:' .. id) or 0))
    if n > 0 then redis.call('HINCRBY', k, 'used', -n) end
    redis.call('HDEL', k, 'm:' .. id, 't:' .. id)
  end
  return tonumber(redis.call('HGET', k, 'used') or 0)
end
return redis.error_reply('budget.lua: unknown operation ' .. tostring(op))
