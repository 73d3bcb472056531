-- MemoryCoordinator.finish: a healthy operation earns retries (budget_deposit), then
-- breaker_finish. ARGV: idle, health (success|failure|neutral), probe 0|1,
-- consecutive_failures (0: no breaker), failure_ratio (-1: off), window, min_operations,
-- cool_down, retry budget ttl (0: off).
-- Returns {1 when this finish opened the breaker else 0, the state entered (moved): 'open',
-- 'closed' (a successful probe) or '' (no transition)}.
local verdict = ARGV[2]
local budget_ttl = finite(ARGV[9]) or 0
if budget_ttl > 0 and verdict == 'success' then
  local current, _, _, fresh = budget_live(KEYS[4], budget_ttl)
  budget_add(KEYS[4], budget_ttl, 'd', current, fresh)
end
if (finite(ARGV[4]) or 0) <= 0 then
  return {0, ''}
end
local probe = ARGV[3] == '1'
local consecutive = finite(ARGV[4]) or 5
local ratio = finite(ARGV[5]) or -1
local window = finite(ARGV[6]) or 20
local min_ops = finite(ARGV[7]) or 10
local cool_down = finite(ARGV[8]) or 30

local b = load(KEYS[1], {'phase', 'fails', 'hist'})
local phase = b.phase
if phase ~= 'open' and phase ~= 'half_open' then phase = 'closed' end

local function open()
  hset(KEYS[1], 'phase', 'open', 'open_until', fmt(NOW + cool_down),
             'fails', '0', 'hist', '')
  hdel(KEYS[1], 'probe_until')
  extend(KEYS[1], math.max(IDLE, cool_down) + 1)
  return {1, 'open'}
end

if probe and phase == 'half_open' then
  if verdict == 'success' then
    hset(KEYS[1], 'phase', 'closed', 'fails', '0', 'hist', '')
    hdel(KEYS[1], 'open_until', 'probe_until')
    extend(KEYS[1], IDLE + 1)
    return {0, 'closed'}
  elseif verdict == 'failure' then
    return open()
  end
  hdel(KEYS[1], 'probe_until')
  return {0, ''}
end
if phase ~= 'closed' or (verdict ~= 'success' and verdict ~= 'failure') then
  return {0, ''}
end

local failed = verdict == 'failure'
local fails = count(b.fails, 1e9) or 0
local hist = b.hist or ''
if not string.match(hist, '^[01]*$') then hist = '' end
if failed then fails = fails + 1 else fails = 0 end
hist = hist .. (failed and '1' or '0')
if #hist > window then hist = string.sub(hist, -window) end
local _, failures = string.gsub(hist, '1', '')
if fails >= consecutive or (ratio >= 0 and #hist >= min_ops and failures >= ratio * #hist) then
  return open()
end
hset(KEYS[1], 'phase', 'closed', 'fails', string.format('%d', fails), 'hist', hist)
extend(KEYS[1], IDLE + 1)
return {0, ''}
