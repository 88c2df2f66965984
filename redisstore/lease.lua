-- lease.lua: the fence of one host's lease, on the host's own slot, so
-- that apply.lua and breaker.lua check it atomically with their writes.
-- KEYS[1] the host's lease hash: owner, token, until (server ms)
-- Times are the server's (TIME, in ms); `now` is '' but in the step tests.
-- ARGV[1] is the operation:
--   acquire me lease now    take the host unless another process holds an
--                           unexpired lease: the token goes up by one.
--                           Returns {token, lease ms left, ms until the
--                           host's next request is allowed}, or {0, ms
--                           left, holder} when another holds it
--   renew me token lease now
--                           extend my lease if token is still the host's:
--                           returns {1, lease}, or {0, 0, holder}
--   release me token next now
--                           end my lease (the token stays, for the fence);
--                           the host's next request is allowed no sooner
--                           than next ms from now (politeness carried to
--                           the next holder)
-- The token only grows: a write fenced with an older token is a write of a
-- process that lost the host, however late it arrives.
local k, op = KEYS[1], ARGV[1]
local function clock(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
if op == 'acquire' then
  local me, lease, now = ARGV[2], tonumber(ARGV[3]), clock(ARGV[4])
  local holder = redis.call('HGET', k, 'owner')
  local untilMs = tonumber(redis.call('HGET', k, 'until') or '0')
  if holder and holder ~= me and untilMs > now then
    return {0, untilMs - now, holder}
  end
  local token = redis.call('HINCRBY', k, 'token', 1)
  redis.call('HSET', k, 'owner', me, 'until', now + lease)
  local nextAt = tonumber(redis.call('HGET', k, 'next') or '0')
  return {token, lease, math.max(0, nextAt - now)}
elseif op == 'renew' then
  local me, token, lease, now = ARGV[2], ARGV[3], tonumber(ARGV[4]), clock(ARGV[5])
  local holder = redis.call('HGET', k, 'owner') or ''
  if holder ~= me or redis.call('HGET', k, 'token') ~= token then
    return {0, 0, holder}
  end
  redis.call('HSET', k, 'until', now + lease)
  return {1, lease}
elseif op == 'release' then
  if redis.call('HGET', k, 'owner') ~= ARGV[2] or redis.call('HGET', k, 'token') ~= ARGV[3] then
    return 0
  end
  redis.call('HDEL', k, 'owner', 'until')
  local wait = tonumber(ARGV[4] or '0') or 0
  if wait > 0 then
    redis.call('HSET', k, 'next', clock(ARGV[5] or '') + wait)
  else
    redis.call('HDEL', k, 'next')
  end
  return 1
end
return redis.error_reply('lease.lua: unknown operation ' .. tostring(op))
