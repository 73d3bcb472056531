-- breaker_admit. ARGV: idle, probe_ttl.
-- Returns {allowed 0|1, probe 0|1, retry_in seconds or '', the state entered (moved):
-- 'half_open' when this call admitted the probe of an open breaker, else ''}.
local probe_ttl = finite(ARGV[2]) or 30
local b = load(KEYS[1], {'phase', 'open_until', 'probe_until'})
local phase = b.phase
if phase ~= 'open' and phase ~= 'half_open' then
  return {1, 0, '', ''}
end
local probe_until = instant(b.probe_until) or NEVER
if phase == 'open' then
  local open_until = instant(b.open_until) or NEVER
  if NOW < open_until then
    return {0, 0, fmt(open_until - NOW), ''}
  end
  probe_until = NEVER
end
if NOW < probe_until then
  return {0, 0, fmt(probe_until - NOW), ''}
end
hset(KEYS[1], 'phase', 'half_open', 'probe_until', fmt(NOW + probe_ttl))
extend(KEYS[1], math.max(IDLE, probe_ttl) + 1)
local entered = ''
if phase == 'open' then entered = 'half_open' end
return {1, 1, '', entered}
