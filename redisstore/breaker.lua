-- breaker.lua: applies one classified outcome to a host's fleet breaker,
-- atomically. It is the authority on the state machine in fleet mode and
-- applies exactly breaker.Breaker.Advance, the Registry's ticket acceptance
-- (Refused always counts) and breaker.Breaker.Record. Time comes from the
-- caller; the script never reads the server's clock.
--
-- (breaker_common.lua is loaded in front of it.)
--
-- KEYS[1] breaker hash, KEYS[2] probe gate, KEYS[3] transitions list
-- ARGV[1] class            ARGV[2] detail           ARGV[3] now (Unix ms)
-- ARGV[4] ticket gen       ARGV[5] ticket probe 0/1 ARGV[6] threshold
-- ARGV[7] rest (ms)        ARGV[8] restmax (ms)     ARGV[9] probes
-- ARGV[10] disabled 0/1    ARGV[11] idle expiry (ms) ARGV[12] host (for the log)
-- KEYS[4] and ARGV[13], if given: the host's lease hash (lease.lua) and the
-- token the outcome's request was sent under; an outcome whose token is no
-- longer the host's is refused (status 0, nothing written): the process
-- that sent it lost the host.
--
-- Reply: {1, state, failures, probes, opened, rest, level, down, gen, hold,
-- hold_reason, pause_reason, transition JSON...}: the breaker after the
-- outcome and the transitions it caused, in order.
--
-- Writes: none at all when the breaker is unchanged (a clean closed host
-- answering ok costs one EVALSHA and no write; an absent hash stays
-- absent). Otherwise every field is written, each transition is appended to
-- the log, and the hash and the log get the idle expiry if unheld, or lose
-- any expiry if held.

local class, detail, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local tgen, probe = tonumber(ARGV[4]), ARGV[5] == '1'
local threshold, rest, restmax, need = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local disabled, idle, host = ARGV[10] == '1', tonumber(ARGV[11]), ARGV[12]

local b, before = readBreaker()
local function reply(trs) return replyOf(b, 1, trs) end

if KEYS[4] and (ARGV[13] or '') ~= '' and redis.call('HGET', KEYS[4], 'token') ~= ARGV[13] then
  return replyOf(b, 0, {})
end

if disabled and class ~= 'refused' then
  return reply({})
end

local trs = {}
local function transition(from, c, d, reason)
  trs[#trs + 1] = transitionOf(b, now, host, from, c, d, reason)
end

local function open() openBreaker(b, now, rest) end

-- Breaker.close
local function close()
  b.state = CLOSED
  b.failures, b.probes = 0, 0
  b.opened, b.down = 0, 0
  b.rest, b.level = rest, 0
  b.gen = b.gen + 1
end

-- Breaker.escalate: Rest <= RestMax/2 (integer halves of whole
-- milliseconds) is 2*Rest <= RestMax.
local function escalate()
  if b.rest <= 0 then b.rest = rest end
  local nxt = restmax
  if 2 * b.rest <= restmax then nxt = 2 * b.rest end
  if nxt > b.rest then
    b.rest = nxt
    b.level = b.level + 1
  end
end

-- Breaker.Record; true when it caused a transition.
local function record()
  if class == 'refused' then
    if has(b.hold, CASE) then return false end
    if b.hold == 0 then open() else b.gen = b.gen + 1 end
    b.hold = bit.bor(b.hold, CASE)
    b.hold_reason = detail
    return true
  elseif b.state == CLOSED then
    if class == 'ok' then
      b.failures = 0
    elseif class == 'transient' then
      b.failures = b.failures + 1
      if b.failures >= threshold then
        open()
        return true
      end
    end
  elseif b.state == HALF then
    if class == 'ok' then
      b.probes = b.probes + 1
      if b.probes >= need then
        close()
        return true
      end
    elseif class == 'transient' then
      escalate()
      open()
      return true
    elseif class == 'throttled' or class == 'permanent' then
      b.down = now
    end
  end
  return false
end

local gen0 = b.gen

-- Breaker.Advance (not with the breaker disabled, as Registry.admit).
if not disabled and b.state == OPEN and b.hold == 0 and now >= b.opened + b.rest then
  b.state, b.probes = HALF, 0
  b.gen = b.gen + 1
  transition(OPEN, '', '', '')
end

-- Registry.report's acceptance (entry.accepts), Refused always counting.
local accepted
if class == 'refused' then
  accepted = true
elseif b.state == HALF then
  accepted = probe and tgen == b.gen
elseif b.state == CLOSED then
  accepted = not probe
else
  accepted = false
end

if accepted then
  local from = b.state
  if record() then transition(from, class, detail, '') end
end

-- The probe gate: a new generation frees it, and so does the probe's own
-- report.
if b.gen ~= gen0 then
  redis.call('DEL', KEYS[2])
elseif probe then
  local g = redis.call('GET', KEYS[2])
  if g and tonumber(g) == tgen then redis.call('DEL', KEYS[2]) end
end

return store(b, before, trs, 1, idle)
