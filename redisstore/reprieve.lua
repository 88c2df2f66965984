-- reprieve.lua: sends a host's fleet breaker that a local fault opened
-- back to half-open, atomically, as breaker.Registry.Reprieve does for the
-- copy of the process whose network failed: a probe, not a rest, decides
-- it. It applies only while the breaker is still the circuit the incident
-- opened: open, unheld, of the generation the process's copy had, and down
-- since the incident began. Anything else (closed or re-opened since, by
-- this process or another, held by a person) is left alone.
--
-- (breaker_common.lua is loaded in front of it.)
--
-- KEYS[1] breaker hash, KEYS[2] probe gate, KEYS[3] transitions list
-- ARGV[1] the generation of the open circuit   ARGV[2] the incident's start (Unix ms)
-- ARGV[3] now (Unix ms)    ARGV[4] rest (ms)   ARGV[5] idle expiry (ms)
-- ARGV[6] host (for the log)                   ARGV[7] the transition's reason
--
-- Reply: {status, state, failures, probes, opened, rest, level, down, gen,
-- hold, hold_reason, pause_reason, transition JSON...}: status 1 when the
-- breaker was reprieved, 0 when it was left alone (nothing written).

local opened, since, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local rest, idle, host, reason = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], ARGV[7]

local b, before = readBreaker()
if b.state ~= OPEN or b.hold ~= 0 or b.gen ~= opened or b.down == 0 or b.down < since then
  return replyOf(b, 0, {})
end

b.state, b.probes = HALF, 0
b.gen = b.gen + 1
b.rest, b.level, b.down = rest, 0, now
local trs = {transitionOf(b, now, host, OPEN, '', '', reason)}
redis.call('DEL', KEYS[2])
return store(b, before, trs, 1, idle)
