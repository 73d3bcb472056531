-- Give back a lease, then _logic.learn: close the gate on throttling (gate_delay), remember
-- the quota for pacing and restart the window's count. The values are the response's
-- Throttle, read by the flow with the operation's profile (hint and reset include its slack).
-- ARGV: idle, lease or '', throttled 0|1, hint (-1: none), remaining (-1), limit (-1),
-- reset (-1), floor, multiplier, max_gate, made 0|1 (the attempt was made: an answer came
-- back, which ends the key's first window). Returns 1, or for a lease that charged tokens the
-- ledgers' window numbers after it ('w1:w2:w3', see tokens_learned).
local lease = ARGV[2]
local throttled = ARGV[3] == '1'
local hint = finite(ARGV[4]) or -1
local remaining = finite(ARGV[5]) or -1
local quota = finite(ARGV[6]) or -1
local reset = finite(ARGV[7]) or -1
local floor = finite(ARGV[8]) or 1
local multiplier = finite(ARGV[9]) or 2
local max_gate = finite(ARGV[10]) or 3600
local made = ARGV[11] == '1'
local state, slots, leases = KEYS[1], KEYS[2], KEYS[3]

local answered = 0  -- the response's own request, in flight until now
if lease ~= '' then
  answered = lease_back(leases, lease)
end
-- optionally, for a lease that charged tokens (tokens.lua, Ledgers.learned): the answer's
-- status ('': none), then per token dimension its limit, remaining and seconds to reset ('':
-- not named), then per dimension 1 when a 429 refused it, then the usage per dimension ('':
-- not read)
local charge = nil
local reply = 1
if lease ~= '' and ARGV[12] ~= nil then charge = lease_charge(lease) end
if charge ~= nil then
  local readings, refused, usage = {}, {}, {}
  for i = 1, 3 do
    local at = 10 + 3 * i
    local named = {count(ARGV[at], 1e15), count(ARGV[at + 1], 1e15), finite(ARGV[at + 2])}
    if named[1] ~= nil or named[2] ~= nil then readings[i] = named end
    refused[i] = ARGV[21 + i] == '1'
    usage[i] = count(ARGV[24 + i], 1e15)
  end
  if usage[1] == nil then usage = nil end
  reply = tokens_learned(KEYS[6], leases, charge, finite(ARGV[12]), readings, refused, usage)
end
local observed = remaining >= 0 and reset > 0
if made then  -- _logic.learn: any answer ends the first window
  if fields_of().answered == nil then
    hset(state, 'answered', fmt(NOW))  -- its instant: still_probing
    -- the first answer names no quota window: the first acquire bounds none
    if not observed then hdel(state, 'first') end
  end
end
if not throttled and not observed then
  return reply
end

local s = load(state, {'gate', 'streak', 'remaining', 'limit', 'reset_at', 'quota', 'used',
                       'rolled_at'})
local far = NOW
if throttled then
  local gate = instant(s.gate) or NEVER
  local delay
  if hint >= 0 then
    delay = math.min(hint, max_gate)
  else
    -- gate_delay without a hint: Throttle.wait of the shared streak
    local streak = count(s.streak, 1e6) or 0
    if NOW - gate > floor then streak = 0 end
    delay = math.min(floor * multiplier ^ math.min(streak, 32), max_gate)
    hset(state, 'streak', string.format('%d', streak + 1))
  end
  local closes = NOW + delay
  local known_reset = instant(s.reset_at)
  if hint >= 0 and reset > 0 and math.abs(hint - reset) <= EPSILON and known_reset ~= nil
      and NOW < known_reset and math.abs(closes - known_reset) < 1 then
    closes = math.min(closes, known_reset)  -- the reset named again: the earlier is closer
  end
  local rebook = remaining < 0 and lr_cut()  -- no quota named: _logic.rate_cut
  gate = math.max(gate, closes)
  hset(state, 'gate', fmt(gate))
  far = math.max(far, gate)
  if rebook then  -- _logic.rebooks: every slot asks again, spaced from the gate
    rc('DEL', slots)
    hset(state, 'tail', fmt(math.min(instant(fields_of().tail) or NEVER, gate)))
  else
    rc('ZREMRANGEBYSCORE', slots, '-inf', '(' .. fmt(gate - EPSILON))
  end
end
if observed then
  local in_flight = live_leases(leases)
  rolled(state, s, in_flight + answered)
  local reset_at = NOW + reset
  local known = count(s.remaining, 1e15)
  local known_at = instant(s.reset_at)
  local same = known_at ~= nil and math.abs(reset_at - known_at) < 1
  local stale = same and known ~= nil and remaining > known
  -- one reset named twice: the earlier naming is the closer (each lies at or after the real
  -- one by the time its answer took to get here)
  if same then reset_at = math.min(reset_at, known_at) end
  local rolled_at = instant(s.rolled_at)
  if rolled_at ~= nil and reset_at > rolled_at + EPSILON and (known_at == nil or reset_at < known_at) then
    -- the window's length: from the reset it rolled over at to this one's closest naming
    hset(state, 'window', fmt(math.min(reset_at - rolled_at, max_gate)))
  end
  if stale and reset_at < known_at then
    hset(state, 'reset_at', fmt(reset_at))  -- a stale count, a closer reset
  end
  if not stale then
    hset(state, 'remaining', string.format('%d', remaining), 'reset_at', fmt(reset_at))
    if quota >= 0 and quota >= remaining then
      -- window_used: the running count, kept between "all in flight counted" and "none"
      local used = count(s.used, 1e15)
      local counting = used ~= nil and (same or known_at == nil)  -- rolled into this window
      local low = quota - remaining
      local high = low + in_flight
      if counting then used = math.max(low, math.min(used, high)) else used = high end
      hset(state, 'limit', string.format('%d', quota), 'used', string.format('%d', used),
                 'quota', string.format('%d', math.max(quota - used, 0)))
    else
      hset(state, 'quota', string.format('%d', math.max(remaining - in_flight, 0)))
      hdel(state, 'limit', 'used')
    end
    far = math.max(far, reset_at)
  end
end
extend(state, math.max(IDLE, far - NOW) + 1)
return reply
