-- retrybudget: shared by every script (prepended to each body).
--
-- KEYS[1] state hash, KEYS[2] slots zset, KEYS[3] leases zset, KEYS[4] budget hash, KEYS[5]
-- live workers zset.
-- ARGV[1] is always the idle TTL in seconds. Every instant is seconds on this server's clock
-- (TIME): clients' clocks differ, so they only ever receive relative waits. Values read back
-- are checked: garbage, NaN, infinities and implausible instants count as absent, and a key
-- holding the wrong type is dropped (rc).

local HORIZON = __HORIZON__          -- seconds ahead a stored instant may plausibly lie
local EPSILON = __EPSILON__          -- _logic.EPSILON
local SLICES = __SLICES__            -- _logic.SLICES
local NEVER = -math.huge             -- _logic.NEVER
local WORKER_TTL = __WORKER_TTL__    -- _redis.WORKER_TTL
local PROBE_PATIENCE = __PROBE_PATIENCE__  -- _logic.PROBE_PATIENCE

local function finite(v)
  local n = tonumber(v)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return nil end
  return n
end

local TIME = redis.call('TIME')
local NOW = tonumber(TIME[1]) + tonumber(TIME[2]) / 1000000
local IDLE = finite(ARGV[1]) or 600

local function instant(v)
  local n = finite(v)
  if n == nil or n < 0 or n > NOW + HORIZON then return nil end
  return n
end

local function count(v, high)
  local n = finite(v)
  if n == nil or n < 0 or n > high or n ~= math.floor(n) then return nil end
  return n
end

local function fmt(x)
  return string.format('%.6f', x)
end

-- redis.call on `key`, which drops a key holding the wrong type (then runs the command
-- again on the empty key): no TYPE check per call.
local DROPPED = {}  -- keys dropped so: their recorded expiry no longer holds
local function rc(cmd, key, ...)
  local r = redis.pcall(cmd, key, ...)
  if type(r) == 'table' and r.err then
    if string.sub(r.err, 1, 9) == 'WRONGTYPE' then
      redis.call('DEL', key)
      DROPPED[key] = true
    end
    return redis.call(cmd, key, ...)
  end
  return r
end

-- The state hash (KEYS[1]) is read once per call, every field at once (one HMGET), kept in
-- CACHE, and written once at the end of the call (flush: one HSET, an HDEL if any field
-- went). Its fields also record when the state, the budget and the workers keys expire, so
-- a call extends a TTL only when it runs short (once per window, not per request).
local FIELDS = {'phase', 'open_until', 'probe_until', 'fails', 'hist', 'gate', 'tail', 'herd',
                'streak', 'remaining', 'limit', 'reset_at', 'quota', 'used', 'window',
                'answered', 'rolled_at', 'first', 'seq', 'booked_to', 'x_state', 'x_budget',
                'x_workers'}
local CACHE, DIRTY, STATE_TTL = nil, {}, nil
local PAD = 1.25  -- a TTL extended goes a quarter further than asked
local RECORD = {}  -- key -> the state field recording its expiry
if #KEYS >= 5 then
  RECORD[KEYS[1]], RECORD[KEYS[4]], RECORD[KEYS[5]] = 'x_state', 'x_budget', 'x_workers'
end

local function fields_of()
  if CACHE == nil then
    CACHE = {}
    local values = rc('HMGET', KEYS[1], unpack(FIELDS))
    for i, f in ipairs(FIELDS) do
      if values[i] then CACHE[f] = values[i] end
    end
  end
  return CACHE
end

-- The state hash's fields as a table (a copy); absent fields are nil.
local function load(key, fields)
  local c, out = fields_of(), {}
  for _, f in ipairs(fields) do out[f] = c[f] end
  return out
end

-- HSET / HDEL on the state hash, sent by flush.
local function hset(key, ...)
  local c, a = fields_of(), {...}
  for i = 1, #a, 2 do
    c[a[i]], DIRTY[a[i]] = a[i + 1], a[i + 1]
  end
end

local function hdel(key, ...)
  local c = fields_of()
  for _, f in ipairs({...}) do
    c[f], DIRTY[f] = nil, false
  end
end

-- The TTL to give a key whose expiry the state records (`known`, nil: none) when it must
-- live `seconds` more: nil when it already does, else a quarter more than that (PAD), so the
-- next calls of the next quarter need not extend it again. Never shorter than the key's TTL: one not recorded (or
-- dropped) is read first (PTTL; -2 when the key is not there yet).
local function lengthen(key, known, seconds)
  if known ~= nil and not DROPPED[key] then
    if known >= NOW + seconds then return nil end
    if known > NOW then return math.ceil(PAD * seconds * 1000) end
  end
  return math.max(rc('PTTL', key), math.ceil(PAD * seconds * 1000))
end

-- Make sure `key` lives at least `seconds` more (never shortens a TTL). A key whose expiry
-- the state records is extended only when that runs short (the state's own at flush, after
-- it is written); `fresh`: the key may just have been made, with no TTL yet.
local function extend(key, seconds, fresh)
  local field = RECORD[key]
  if field == nil then
    local ms = math.ceil(seconds * 1000)
    if rc('PTTL', key) < ms then rc('PEXPIRE', key, ms) end
    return
  end
  if key == KEYS[1] then
    STATE_TTL = math.max(STATE_TTL or 0, seconds)
    return
  end
  local known = instant(fields_of()[field])
  if fresh then known = nil end
  local ms = lengthen(key, known, seconds)
  if ms == nil then return end
  rc('PEXPIRE', key, ms)
  hset(KEYS[1], field, fmt(NOW + ms / 1000))
end

-- The end of every call: the state's writes, and its TTL when written or asked for.
local function flush()
  if next(DIRTY) == nil and STATE_TTL == nil then return end
  local seconds = math.max(STATE_TTL or 0, IDLE + 1)
  local ms = lengthen(KEYS[1], instant(fields_of().x_state), seconds)
  if ms ~= nil then hset(KEYS[1], 'x_state', fmt(NOW + ms / 1000)) end
  local set, del = {}, {}
  for f, v in pairs(DIRTY) do
    if v then
      set[#set + 1] = f
      set[#set + 1] = v
    else
      del[#del + 1] = f
    end
  end
  if #set > 0 then rc('HSET', KEYS[1], unpack(set)) end
  if #del > 0 then rc('HDEL', KEYS[1], unpack(del)) end
  if ms ~= nil then rc('PEXPIRE', KEYS[1], ms) end
  DIRTY, STATE_TTL = {}, nil
end

-- A fresh id from the state hash's counter (garbage restarts it).
local function next_id(key)
  local n = (count(fields_of().seq, 1e12) or 0) + 1
  hset(key, 'seq', string.format('%d', n))
  return string.format('%d', n)
end

-- The retry budget's live slices (_logic/_budget.py: _live): sums of healthy operations and retries over the
-- last SLICES slices; older or garbage fields are deleted.
local function budget_live(key, ttl)
  local current = math.floor(NOW * SLICES / ttl)
  local flat = rc('HGETALL', key)
  if #flat > 8 * SLICES then
    rc('DEL', key)
    return current, 0, 0, true
  end
  local deposits, withdrawals, stale = 0, 0, {}
  for i = 1, #flat, 2 do
    local kind, id = string.match(flat[i], '^([dw]):(%d+)$')
    local n = count(flat[i + 1], 1e12)
    id = tonumber(id)
    if kind == nil or n == nil or id == nil or id <= current - SLICES or id > current then
      stale[#stale + 1] = flat[i]
    elseif kind == 'd' then
      deposits = deposits + n
    else
      withdrawals = withdrawals + n
    end
  end
  if #stale > 0 then rc('HDEL', key, unpack(stale)) end
  -- fresh: the hash is (or is now) empty, so the next write makes it with no TTL
  return current, deposits, withdrawals, 2 * #stale == #flat
end

local function budget_add(key, ttl, kind, current, fresh)
  rc('HINCRBY', key, kind .. ':' .. string.format('%d', current), 1)
  extend(key, ttl + 1, fresh)
end

-- Live leases (requests in flight), after dropping the expired ones; counted once per call
-- (FLIGHT, kept up to date by lease_given and lease_back).
local FLIGHT = nil
local function live_leases(key)
  if FLIGHT == nil then
    rc('ZREMRANGEBYSCORE', key, '-inf', fmt(NOW))
    FLIGHT = rc('ZCARD', key)
  end
  return FLIGHT
end

local function lease_back(key, lease)
  local n = rc('ZREM', key, lease)
  if FLIGHT ~= nil then FLIGHT = FLIGHT - n end
  return n
end

local function lease_given(key, lease, ttl)
  local n = rc('ZADD', key, fmt(NOW + ttl), lease)
  if FLIGHT ~= nil then FLIGHT = FLIGHT + n end
  local ms = math.ceil((ttl + 1) * 1000)  -- every lease expires by then: never shortens
  rc('PEXPIRE', key, ms)
end

-- _logic.rolled: once the observed window has reset, drop the observation and count again
-- from the limit, less the requests still in flight (the new window's first `used`). `s`
-- holds the state's fields (remaining, limit, reset_at, quota, used) and is updated; returns
-- the window's count (nil: not counted).
local function rolled(key, s, in_flight)
  local quota = count(s.quota, 1e15)
  local reset_at = instant(s.reset_at)
  if reset_at == nil or NOW + EPSILON < reset_at then return quota end  -- EPSILON: a slot
  s.remaining, s.reset_at, s.rolled_at = nil, nil, fmt(reset_at)
  hdel(key, 'remaining', 'reset_at')
  hset(key, 'rolled_at', s.rolled_at)
  local size = count(s.limit, 1e15)
  if size == nil then
    s.quota, s.used = nil, nil
    hdel(key, 'quota', 'used')
    return nil
  end
  local used = math.min(in_flight, size)
  quota = size - used
  s.quota, s.used = string.format('%d', quota), string.format('%d', used)
  hset(key, 'quota', s.quota, 'used', s.used)
  return quota
end
