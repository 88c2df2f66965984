-- shard.lua: the cross-host structures of one shard, all under one hash tag.
-- KEYS: 1 ready (zset host -> ms it next needs a worker, or its lease's
--       expiry while held), 2 owner (hash host -> process), 3 touch (hash
--       host -> count of adds), 4 hosts (set)
-- Times are the server's (TIME, in ms): a process's clock never decides
-- whose lease has run out. A `now` argument is '' but in the step tests,
-- which pass a fixed time.
-- ARGV[1] is the operation:
--   touch now host...            hosts given new URLs: listed, and ready now
--                                unless already listed (held or waiting)
--   claim me now lease limit     take up to limit ready hosts for lease ms;
--                                returns them
--   renew me now lease host...   extend my leases by lease ms from now;
--                                returns the hosts I lost
--   release me host now delay    give a held host back, ready delay ms from
--                                now ('held': never, until a person acts)
--   drop me host touched now     forget a drained host unless touched since
--                                touched was read; returns 1 if dropped
--   wake now host                make an unheld, waiting host ready now
--   restore me host owner left now
--                                a host claimed here whose host lease
--                                another process holds for left ms more:
--                                give it back to that owner
-- Every operation that makes a host ready publishes the shard's number on
-- the work channel (ARGV: "N", or "N DELAY" for a host ready in DELAY ms),
-- so that idle processes wait for it instead of polling; so does a drop
-- that leaves the shard without a host to crawl, for the fleet's end.
local ready, owner, touch, hosts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op = ARGV[1]
local HELD = 1125899906842624 -- 2^50, heldScore
local CHANNEL = 'bw:work'
local shard = string.match(ready, '{s(%d+)}') or '0'

local function clock(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function announce(delay)
  if delay and delay > 0 then
    redis.call('PUBLISH', CHANNEL, shard .. ' ' .. string.format('%d', delay))
  else
    redis.call('PUBLISH', CHANNEL, shard)
  end
end

if op == 'touch' then
  local now, new = clock(ARGV[2]), 0
  for i = 3, #ARGV do
    local h = ARGV[i]
    new = new + redis.call('ZADD', ready, 'NX', now, h)
    redis.call('HINCRBY', touch, h, 1)
    redis.call('SADD', hosts, h)
  end
  if new > 0 then announce(0) end
  return 0
elseif op == 'claim' then
  local me, now, lease = ARGV[2], clock(ARGV[3]), tonumber(ARGV[4])
  local due = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
  for _, h in ipairs(due) do
    redis.call('HSET', owner, h, me)
    redis.call('ZADD', ready, now + lease, h)
  end
  return due
elseif op == 'renew' then
  local me, now, lease, lost = ARGV[2], clock(ARGV[3]), tonumber(ARGV[4]), {}
  for i = 5, #ARGV do
    local h = ARGV[i]
    if redis.call('HGET', owner, h) == me then
      redis.call('ZADD', ready, 'XX', now + lease, h)
    else
      lost[#lost + 1] = h
    end
  end
  return lost
elseif op == 'release' then
  local me, h = ARGV[2], ARGV[3]
  if redis.call('HGET', owner, h) ~= me then return 0 end
  redis.call('HDEL', owner, h)
  if ARGV[5] == 'held' then
    redis.call('ZADD', ready, HELD, h)
    return 1
  end
  local delay = math.max(0, tonumber(ARGV[5]))
  redis.call('ZADD', ready, clock(ARGV[4]) + delay, h)
  announce(delay)
  return 1
elseif op == 'drop' then
  local me, h = ARGV[2], ARGV[3]
  if redis.call('HGET', owner, h) ~= me then return 0 end
  redis.call('HDEL', owner, h)
  if (redis.call('HGET', touch, h) or '') ~= ARGV[4] then
    redis.call('ZADD', ready, clock(ARGV[5]), h) -- new URLs came meanwhile
    announce(0)
    return 0
  end
  redis.call('ZREM', ready, h)
  if redis.call('ZCOUNT', ready, '-inf', '(' .. HELD) == 0 then announce(0) end
  return 1
elseif op == 'wake' then
  local h = ARGV[3]
  if redis.call('HEXISTS', owner, h) == 0 and redis.call('ZSCORE', ready, h) then
    redis.call('ZADD', ready, clock(ARGV[2]), h)
    announce(0)
  end
  return 0
elseif op == 'restore' then
  local me, h, holder, left = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
  if redis.call('HGET', owner, h) ~= me then return 0 end
  redis.call('HSET', owner, h, holder)
  redis.call('ZADD', ready, clock(ARGV[6]) + left, h)
  return 1
end
return redis.error_reply('shard.lua: unknown operation ' .. tostring(op))
