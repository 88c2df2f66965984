-- hold.lua: adds or releases an operator's pause, or resolves a case, on a
-- host's fleet breaker, atomically: Registry.Pause / Unpause / ResolveCase
-- with Breaker.pause and Breaker.unhold. Time comes from the caller.
--
-- (breaker_common.lua is loaded in front of it.)
--
-- KEYS[1] breaker hash, KEYS[2] probe gate, KEYS[3] transitions list
-- ARGV[1] op: 'pause', 'unpause' or 'resolve'
-- ARGV[2] the pause's reason (pause only)
-- ARGV[3] now (Unix ms)    ARGV[4] rest (ms)
-- ARGV[5] idle expiry (ms) ARGV[6] host (for the log)
--
-- Reply: {status, state, failures, probes, opened, rest, level, down, gen,
-- hold, hold_reason, pause_reason, transition JSON...}. status is 1, or 0
-- when the host does not have the hold to release (nothing is written; the
-- fields are the breaker as it stands).
--
-- Writes as breaker.lua: none when nothing changed; else every field, the
-- transition, and the idle expiry if unheld or no expiry if held.

local op, why, now, rest = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local idle, host = tonumber(ARGV[5]), ARGV[6]

local b, before = readBreaker()
local function reply(status, trs) return replyOf(b, status, trs) end

local trs = {}
local function transition(from, reason)
  trs[#trs + 1] = transitionOf(b, now, host, from, '', '', reason)
end

local from = b.state
local gen0 = b.gen
if op == 'pause' then
  -- Breaker.pause: a new pause adds the hold (opening an unheld circuit
  -- as Breaker.open does), a repeated one only replaces the reason.
  local moved = not has(b.hold, PAUSED)
  if moved then
    if b.hold == 0 then
      openBreaker(b, now, rest)
    else
      b.gen = b.gen + 1
    end
    b.hold = bit.bor(b.hold, PAUSED)
  end
  b.pause_reason = why
  if moved then transition(from, why) end
else
  -- Breaker.unhold
  local h, reason = PAUSED, 'unpaused'
  if op == 'resolve' then
    h, reason = CASE, 'case resolved'
  elseif op ~= 'unpause' then
    return redis.error_reply('hold.lua: unknown op ' .. tostring(op))
  end
  if not has(b.hold, h) then
    return reply(0, {})
  end
  b.hold = bit.band(b.hold, bit.bnot(h))
  if h == CASE then b.hold_reason = '' else b.pause_reason = '' end
  if b.hold == 0 then
    b.state, b.probes, b.down = HALF, 0, now
  end
  b.gen = b.gen + 1
  transition(from, reason)
end

if b.gen ~= gen0 then
  redis.call('DEL', KEYS[2])
end

return store(b, before, trs, 1, idle)
