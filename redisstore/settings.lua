-- Merges one process's settings into the fleet's, setting by setting.
-- KEYS[1] the settings hash, KEYS[2] the schema marker.
-- ARGV[1] the schema marker's value; then per setting four values: its
-- name, this process's value, "1" when the process was given it (a flag)
-- or "0" (it came from the store or a default), and the value the process
-- read from the store when it resolved its flags ("" for none).
-- A setting the store lacks is added. A given setting replaces the stored
-- one. Returned, as triples, are the settings another process stored
-- since this one read them: name, the other's value, "replaced" or "kept".
redis.call('SETNX', KEYS[2], ARGV[1])
local out = {}
for i = 2, #ARGV, 4 do
  local name, value, given, read = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local cur = redis.call('HGET', KEYS[1], name)
  if not cur then
    redis.call('HSET', KEYS[1], name, value)
  elseif cur ~= value then
    local raced = cur ~= read
    if given == '1' then
      redis.call('HSET', KEYS[1], name, value)
      if raced then
        out[#out + 1] = name; out[#out + 1] = cur; out[#out + 1] = 'replaced'
      end
    elseif raced then
      out[#out + 1] = name; out[#out + 1] = cur; out[#out + 1] = 'kept'
    end
  end
end
return out
