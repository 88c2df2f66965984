-- shard.lua: the cross-host structures of one shard, all under one hash tag.
-- KEYS: 1 ready (zset host -> ms it next needs a worker, or its lease's
--       expiry while held), 2 owner (hash host -> process), 3 touch (hash
--       host -> count of adds), 4 hosts (set)
-- ARGV[1] is the operation:
--   touch now host...            hosts given new URLs: listed, and ready now
--                                unless already listed (held or waiting)
--   claim me now expiry limit    take up to limit ready hosts; returns them
--   renew me expiry host...      extend my leases; returns the hosts I lost
--   release me host at           give a held host back, ready at at (ms)
--   drop me host touched         forget a drained host unless touched since
--                                touched was read; returns 1 if dropped
--   wake now host                make an unheld, waiting host ready now
local ready, owner, touch, hosts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op = ARGV[1]
if op == 'touch' then
  for i = 3, #ARGV do
    local h = ARGV[i]
    redis.call('ZADD', ready, 'NX', ARGV[2], h)
    redis.call('HINCRBY', touch, h, 1)
    redis.call('SADD', hosts, h)
  end
  return 0
elseif op == 'claim' then
  local me, now, expiry = ARGV[2], ARGV[3], ARGV[4]
  local due = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
  for _, h in ipairs(due) do
    redis.call('HSET', owner, h, me)
    redis.call('ZADD', ready, expiry, h)
  end
  return due
elseif op == 'renew' then
  local me, expiry, lost = ARGV[2], ARGV[3], {}
  for i = 4, #ARGV do
    local h = ARGV[i]
    if redis.call('HGET', owner, h) == me then
      redis.call('ZADD', ready, 'XX', expiry, h)
    else
      lost[#lost + 1] = h
    end
  end
  return lost
elseif op == 'release' then
  local me, h = ARGV[2], ARGV[3]
  if redis.call('HGET', owner, h) ~= me then return 0 end
  redis.call('HDEL', owner, h)
  redis.call('ZADD', ready, ARGV[4], h)
  return 1
elseif op == 'drop' then
  local me, h = ARGV[2], ARGV[3]
  if redis.call('HGET', owner, h) ~= me then return 0 end
  redis.call('HDEL', owner, h)
  if (redis.call('HGET', touch, h) or '') ~= ARGV[4] then
    redis.call('ZADD', ready, 0, h) -- new URLs came meanwhile
    return 0
  end
  redis.call('ZREM', ready, h)
  return 1
elseif op == 'wake' then
  local h = ARGV[3]
  if redis.call('HEXISTS', owner, h) == 0 and redis.call('ZSCORE', ready, h) then
    redis.call('ZADD', ready, ARGV[2], h)
  end
  return 0
end
return redis.error_reply('shard.lua: unknown operation ' .. tostring(op))
