-- breaker_common.lua: what breaker.lua and hold.lua share. Redis scripts
-- cannot include one another, so breaker.go loads each with this text in
-- front of it. KEYS[1] is the breaker hash, KEYS[3] its transitions list.

local CLOSED, OPEN, HALF = 0, 1, 2
local PAUSED, CASE = 1, 2
local STATE = {[0] = 'closed', [1] = 'open', [2] = 'half-open'}
local HOLD = {[0] = '', [1] = 'paused', [2] = 'case', [3] = 'case+paused'}
local NUM = {'state', 'failures', 'probes', 'opened', 'rest', 'level', 'down', 'gen', 'hold'}

local function has(h, x) return bit.band(h, x) == x end

-- readBreaker returns the breaker as stored (absent: clean, closed, gen 0)
-- and a copy, to tell at the end whether anything changed.
local function readBreaker()
  local v = redis.call('HMGET', KEYS[1], 'state', 'failures', 'probes', 'opened', 'rest', 'level',
    'down', 'gen', 'hold', 'hold_reason', 'pause_reason')
  local b = {}
  for i, f in ipairs(NUM) do b[f] = tonumber(v[i]) or 0 end
  b.hold_reason = v[10] or ''
  b.pause_reason = v[11] or ''
  local before = {}
  for k, x in pairs(b) do before[k] = x end
  return b, before
end

-- replyOf is the scripts' reply: {status, the fields, transition JSON...}.
local function replyOf(b, status, trs)
  local r = {status}
  for _, f in ipairs(NUM) do r[#r + 1] = b[f] end
  r[#r + 1] = b.hold_reason
  r[#r + 1] = b.pause_reason
  for _, t in ipairs(trs) do r[#r + 1] = t end
  return r
end

-- transitionOf describes a change from state `from` the way
-- Registry.commit does: an empty reason becomes the case's detail, else
-- the pause's.
local function transitionOf(b, now, host, from, c, d, reason)
  if reason == '' then
    if has(b.hold, CASE) then
      reason = b.hold_reason
    elseif has(b.hold, PAUSED) then
      reason = b.pause_reason
    end
  end
  return cjson.encode({at_ms = now, host = host, from = STATE[from], to = STATE[b.state],
    hold = HOLD[b.hold], class = c, detail = d, reason = reason, generation = b.gen})
end

-- openBreaker is Breaker.open: opening from closed starts the down clock
-- and the rest ladder afresh; reopening keeps the escalated rest.
local function openBreaker(b, now, rest)
  if b.state == CLOSED then
    b.down, b.rest, b.level = now, rest, 0
  end
  if b.rest <= 0 then b.rest = rest end
  b.state, b.opened = OPEN, now
  b.failures, b.probes = 0, 0
  b.gen = b.gen + 1
end

-- store writes nothing when b is unchanged; else every field, each
-- transition appended to the log, and the idle expiry on both if unheld,
-- none if held (a held host is never forgotten). It returns the reply.
local function store(b, before, trs, status, idle)
  local changed = false
  for k, x in pairs(b) do
    if before[k] ~= x then changed = true end
  end
  if not changed then
    return replyOf(b, status, trs)
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
  return replyOf(b, status, trs)
end

