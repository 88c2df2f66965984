-- hold.lua: adds or releases an operator's pause, or resolves a case, on a
-- host's fleet breaker, atomically: Registry.Pause / Unpause / ResolveCase
-- with Breaker.pause and Breaker.unhold. Time comes from the caller.
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

local CLOSED, OPEN, HALF = 0, 1, 2
local PAUSED, CASE = 1, 2
local STATE = {[0] = 'closed', [1] = 'open', [2] = 'half-open'}
local HOLD = {[0] = '', [1] = 'paused', [2] = 'case', [3] = 'case+paused'}
local NUM = {'state', 'failures', 'probes', 'opened', 'rest', 'level', 'down', 'gen', 'hold'}

local op, why, now, rest = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local idle, host = tonumber(ARGV[5]), ARGV[6]

local function has(h, x) return bit.band(h, x) == x end

local v = redis.call('HMGET', KEYS[1], 'state', 'failures', 'probes', 'opened', 'rest', 'level',
  'down', 'gen', 'hold', 'hold_reason', 'pause_reason')
local b = {}
for i, f in ipairs(NUM) do b[f] = tonumber(v[i]) or 0 end
b.hold_reason = v[10] or ''
b.pause_reason = v[11] or ''
local before = {}
for k, x in pairs(b) do before[k] = x end

local function reply(status, trs)
  local r = {status}
  for _, f in ipairs(NUM) do r[#r + 1] = b[f] end
  r[#r + 1] = b.hold_reason
  r[#r + 1] = b.pause_reason
  for _, t in ipairs(trs) do r[#r + 1] = t end
  return r
end

local trs = {}
-- As in breaker.lua: Registry.commit's description of a transition.
local function transition(from, reason)
  if reason == '' then
    if has(b.hold, CASE) then
      reason = b.hold_reason
    elseif has(b.hold, PAUSED) then
      reason = b.pause_reason
    end
  end
  trs[#trs + 1] = cjson.encode({at_ms = now, host = host, from = STATE[from], to = STATE[b.state],
    hold = HOLD[b.hold], class = '', detail = '', reason = reason, generation = b.gen})
end

local from = b.state
local gen0 = b.gen
if op == 'pause' then
  -- Breaker.pause: a new pause adds the hold (opening an unheld circuit
  -- as Breaker.open does), a repeated one only replaces the reason.
  local moved = not has(b.hold, PAUSED)
  if moved then
    if b.hold == 0 then
      if b.state == CLOSED then
        b.down, b.rest, b.level = now, rest, 0
      end
      if b.rest <= 0 then b.rest = rest end
      b.state, b.opened = OPEN, now
      b.failures, b.probes = 0, 0
    end
    b.gen = b.gen + 1
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

local changed = false
for k, x in pairs(b) do
  if before[k] ~= x then changed = true end
end
if not changed then
  return reply(1, trs)
end

local w = {}
for _, f in ipairs(NUM) do
  w[#w + 1] = f
  w[#w + 1] = string.format('%d', b[f])
end
w[#w + 1] = 'hold_reason'
w[#w + 1] = b.hold_reason
w[#w + 1] = 'pause_reason'
w[#w + 1] = b.pause_reason
redis.call('HSET', KEYS[1], unpack(w))
for _, t in ipairs(trs) do redis.call('RPUSH', KEYS[3], t) end
if b.hold == 0 then
  redis.call('PEXPIRE', KEYS[1], idle)
  redis.call('PEXPIRE', KEYS[3], idle)
else
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[3])
end
return reply(1, trs)
