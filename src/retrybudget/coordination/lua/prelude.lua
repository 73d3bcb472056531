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
local function rc(cmd, key, ...)
  local r = redis.pcall(cmd, key, ...)
  if type(r) == 'table' and r.err then
    if string.sub(r.err, 1, 9) == 'WRONGTYPE' then redis.call('DEL', key) end
    return redis.call(cmd, key, ...)
  end
  return r
end

-- Make sure `key` lives at least `seconds` more (never shortens a TTL).
local function extend(key, seconds)
  local ms = math.ceil(seconds * 1000)
  if rc('PTTL', key) < ms then rc('PEXPIRE', key, ms) end
end

-- The hash's fields as a table; absent fields are nil.
local function load(key, fields)
  local values = rc('HMGET', key, unpack(fields))
  local out = {}
  for i, f in ipairs(fields) do
    if values[i] then out[f] = values[i] end
  end
  return out
end

-- A fresh id from the state hash's counter (garbage restarts it).
local function next_id(key)
  local n = (count(rc('HGET', key, 'seq'), 1e12) or 0) + 1
  rc('HSET', key, 'seq', string.format('%d', n))
  return string.format('%d', n)
end

-- The retry budget's live slices (_logic._live): sums of healthy operations and retries over the
-- last SLICES slices; older or garbage fields are deleted.
local function budget_live(key, ttl)
  local current = math.floor(NOW * SLICES / ttl)
  local flat = rc('HGETALL', key)
  if #flat > 8 * SLICES then
    rc('DEL', key)
    return current, 0, 0
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
  return current, deposits, withdrawals
end

local function budget_add(key, ttl, kind, current)
  rc('HINCRBY', key, kind .. ':' .. string.format('%d', current), 1)
  extend(key, ttl + 1)
end

-- Live leases (requests in flight), after dropping the expired ones.
local function live_leases(key)
  rc('ZREMRANGEBYSCORE', key, '-inf', fmt(NOW))
  return rc('ZCARD', key)
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
  rc('HDEL', key, 'remaining', 'reset_at')
  rc('HSET', key, 'rolled_at', s.rolled_at)
  local size = count(s.limit, 1e15)
  if size == nil then
    s.quota, s.used = nil, nil
    rc('HDEL', key, 'quota', 'used')
    return nil
  end
  local used = math.min(in_flight, size)
  quota = size - used
  s.quota, s.used = string.format('%d', quota), string.format('%d', used)
  rc('HSET', key, 'quota', s.quota, 'used', s.used)
  return quota
end
