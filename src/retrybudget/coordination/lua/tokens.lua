-- _logic._tokens: a key's token ledgers, one per token dimension (1 tokens, 2 input tokens,
-- 3 output tokens), in KEYS[6] (a hash: l<i> limit, u<i> used, r<i> reset_at, m<i> the
-- lowest remaining named for the window, g<i> gate, w<i> the window's number). A request that charges them holds a
-- lease named 'r:<id>:<tokens>:<input>:<output>', so the charges in flight are read from the
-- leases (lease_charge). Touched only by calls that carry a charge.

local LEDGER_FIELDS = {}
for i = 1, 3 do
  for _, f in ipairs({'l', 'u', 'r', 'm', 'g', 'w'}) do LEDGER_FIELDS[#LEDGER_FIELDS + 1] = f .. i end
end

-- The ledgers as tables {limit, used, reset_at, remaining, gate, window} (absent values nil,
-- gate NEVER, window 0).
local function ledgers_load(key)
  local values = rc('HMGET', key, unpack(LEDGER_FIELDS))
  local out = {}
  for i = 1, 3 do
    local at = (i - 1) * 6
    out[i] = {limit = count(values[at + 1], 1e15), used = count(values[at + 2], 1e15) or 0,
              reset_at = instant(values[at + 3]), remaining = count(values[at + 4], 1e15),
              gate = instant(values[at + 5]) or NEVER, window = count(values[at + 6], 1e15) or 0}
  end
  return out
end

local function ledgers_save(key, ledgers)
  local set, del = {}, {}
  local far = NOW
  for i, d in ipairs(ledgers) do
    local values = {d.limit and string.format('%d', d.limit), string.format('%d', d.used),
                    d.reset_at and fmt(d.reset_at), d.remaining and string.format('%d', d.remaining),
                    d.gate ~= NEVER and fmt(d.gate) or nil,
                    d.window > 0 and string.format('%d', d.window) or nil}
    for j, f in ipairs({'l', 'u', 'r', 'm', 'g', 'w'}) do
      if values[j] then
        set[#set + 1] = f .. i
        set[#set + 1] = values[j]
      else
        del[#del + 1] = f .. i
      end
    end
    far = math.max(far, d.reset_at or NOW, d.gate)
  end
  rc('HSET', key, unpack(set))
  if #del > 0 then rc('HDEL', key, unpack(del)) end
  rc('PEXPIRE', key, math.ceil((math.max(IDLE, far - NOW) + 1) * 1000))
end

-- A lease's charge {tokens, input, output}, or nil (a lease that charged none).
local function lease_charge(lease)
  local t, i, o = string.match(lease, '^r:%d+:(%d+):(%d+):(%d+)$')
  if t == nil then return nil end
  return {tonumber(t), tonumber(i), tonumber(o)}
end

-- The charges of the live leases (requests in flight), by dimension.
local function flight_charges(leases)
  live_leases(leases)  -- drops the expired ones
  local sums = {0, 0, 0}
  for _, lease in ipairs(rc('ZRANGE', leases, 0, -1)) do
    local c = lease_charge(lease)
    if c ~= nil then
      for i = 1, 3 do sums[i] = sums[i] + c[i] end
    end
  end
  return sums
end

-- _logic.ledger_rolled
local function ledger_rolled(d, in_flight)
  if d.reset_at == nil or NOW + EPSILON < d.reset_at then return end
  d.used = in_flight
  if d.limit ~= nil then d.used = math.min(in_flight, d.limit) end
  d.reset_at, d.remaining = nil, nil
  d.window = d.window + 1
end

-- _logic.ledger_hold: the instant the ledger has room for `charge`, or nil (now)
local function ledger_hold(d, charge, spread, in_flight)
  if charge <= 0 then return nil end
  if NOW < d.gate then return d.gate end
  if d.limit == nil or d.used + charge <= d.limit or d.used <= 0 then return nil end
  local soon = NOW + math.max(spread, EPSILON * 2)
  if d.reset_at == nil then return soon end
  local reset = math.max(d.reset_at, NOW + EPSILON * 2)
  if in_flight > 0 then return math.min(reset, soon) end
  return reset
end

-- _logic.ledger_charged
local function ledger_charged(d, amount)
  d.used = math.max(d.used + amount, 0)
end

-- _logic.ledger_closed
local function ledger_closed(d, till)
  d.gate = math.max(d.gate, till)
  if d.limit ~= nil then d.used = math.max(d.used, d.limit) end
end

-- _logic.ledger_learn
local function ledger_learn(d, limit, remaining, reset_in, in_flight)
  if limit ~= nil and (remaining == nil or limit < remaining) then
    d.limit = limit
    return
  end
  if limit == nil or remaining == nil or reset_in == nil or reset_in <= 0 then return end
  ledger_rolled(d, in_flight)
  local reset_at = NOW + reset_in
  local low = limit - remaining
  if d.reset_at ~= nil and math.abs(reset_at - d.reset_at) < 1 then
    reset_at = math.min(reset_at, d.reset_at)
    local stale = d.remaining ~= nil and remaining > d.remaining
    if stale then
      d.used = math.max(d.used, low)
    else
      d.used = math.max(low, math.min(d.used, low + in_flight))
      d.remaining = remaining
    end
    d.limit, d.reset_at = limit, reset_at
  elseif d.reset_at ~= nil and reset_at < d.reset_at then
    d.limit = limit  -- an answer from a window already over
  else
    d.limit, d.used, d.reset_at, d.remaining = limit, math.max(low + in_flight, 0), reset_at, remaining
    d.window = d.window + 1
  end
end

-- _logic.ledger_corrected
local function ledger_corrected(d, window, amount)
  if amount == 0 or window ~= d.window or d.remaining ~= nil then return end
  d.used = math.max(d.used + amount, 0)
end

-- Ledgers.hold: the instant every dimension `charge` charges has room for it, or nil
local function tokens_hold(key, leases, charge, spread)
  local ledgers, flight = ledgers_load(key), flight_charges(leases)
  local till = nil
  for i = 1, 3 do
    ledger_rolled(ledgers[i], flight[i])
    local held = ledger_hold(ledgers[i], charge[i], spread, flight[i])
    if held ~= nil and (till == nil or held > till) then till = held end
  end
  return till, ledgers
end

-- Ledgers.learned: the attempt under a lease that charged `charge` was answered with
-- `status` (nil: no answer), `readings` ({limit, remaining, reset_in} or nil by dimension),
-- `refused` ({bool} by dimension) and `usage` ({tokens, input, output} or nil); its lease is
-- already back. Returns the window numbers its charge is counted in ('w1:w2:w3'), which a
-- late correction of the charge names (one whose answer started a new window: none applies).
local function tokens_learned(key, leases, charge, status, readings, refused, usage)
  local ledgers, flight = ledgers_load(key), flight_charges(leases)
  local windows = {}
  for i = 1, 3 do
    local d = ledgers[i]
    windows[i] = d.window  -- the window its charge is counted in
    ledger_rolled(d, flight[i])
    if status == 429 then
      ledger_charged(d, -charge[i])
    elseif usage ~= nil then
      ledger_charged(d, usage[i] - charge[i])
    end
    local r = readings[i]
    local reset_in = nil
    if r ~= nil then
      reset_in = r[3]
      ledger_learn(d, r[1], r[2], reset_in, flight[i])
    end
    if refused[i] then
      local till = NOW + 1  -- no header named its reset: _ledgers._REFUSED_FOR
      if reset_in ~= nil and reset_in > 0 then till = NOW + reset_in end
      ledger_closed(d, till)
    end
  end
  ledgers_save(key, ledgers)
  return string.format('%d:%d:%d', windows[1], windows[2], windows[3])
end

-- Ledgers.corrected, for each late correction in ARGS from `at` on: their number, then each
-- one's window numbers and amounts by dimension (w1, w2, w3, a1, a2, a3).
local function tokens_corrected(key, leases, args, at)
  local n = count(args[at], 1e6) or 0
  if n == 0 then return end
  local ledgers, flight = ledgers_load(key), flight_charges(leases)
  for i = 1, 3 do ledger_rolled(ledgers[i], flight[i]) end
  for j = 0, n - 1 do
    local base = at + 1 + 6 * j
    for i = 1, 3 do
      local window, amount = count(args[base + i - 1], 1e15), finite(args[base + 2 + i])
      if window ~= nil and amount ~= nil then
        ledger_corrected(ledgers[i], window, math.floor(amount))
      end
    end
  end
  ledgers_save(key, ledgers)
end
