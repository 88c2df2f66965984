-- proc.lua: the heartbeats of the fleet's processes, one per fleet ID.
-- KEYS[1] the procs hash: fleet ID -> the last heartbeat (JSON), which
-- holds the run's instance (a random name each start) and server_ms, the
-- server's time (TIME, ms) when it was written.
-- ARGV[1] is the operation:
--   claim id instance stale beat   take id unless another instance's beat
--       is younger than stale ms: returns {1}, or {0, its beat, its age ms}
--   beat id instance beat          write my beat unless another instance
--       has taken id: returns 1, or 0 (taken over)
--   end id instance                remove my beat
local k, op, id, instance = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function current()
  local raw = redis.call('HGET', k, id)
  if not raw then return nil, nil end
  local ok, beat = pcall(cjson.decode, raw)
  if not ok or type(beat) ~= 'table' then return raw, {} end
  return raw, beat
end
-- write stores the beat raw over what the run's last beat said (a beat
-- that says less, such as the crawl's running mark, keeps the rest).
local function write(raw, last)
  local ok, beat = pcall(cjson.decode, raw)
  if not ok or type(beat) ~= 'table' then beat = {} end
  if last and last.instance == instance then
    for f, v in pairs(last) do
      if beat[f] == nil then beat[f] = v end
    end
  end
  beat.instance, beat.server_ms = instance, now
  redis.call('HSET', k, id, cjson.encode(beat))
end

if op == 'claim' then
  local raw, beat = current()
  if raw and beat.instance ~= instance then
    local age = now - tonumber(beat.server_ms or 0)
    if age < tonumber(ARGV[4]) then return {0, raw, age} end
  end
  write(ARGV[5])
  return {1}
elseif op == 'beat' then
  local raw, beat = current()
  if raw and beat.instance and beat.instance ~= instance then return 0 end
  write(ARGV[4], beat)
  return 1
elseif op == 'end' then
  local raw, beat = current()
  if raw and (beat.instance == instance or not beat.instance) then redis.call('HDEL', k, id) end
  return 0
end
return redis.error_reply('proc.lua: unknown operation ' .. tostring(op))
