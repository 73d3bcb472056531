-- MemoryCoordinator.acquire: the concurrency cap, rolled, then claim a due slot (unless
-- quota_hold) or plan_slot (a release by quota when the window's quota is known, into the
-- first window with room; a due slot the key does not let go is booked so again); a request
-- that goes is sent (counted) and holds a lease.
-- A slot the caller would not wait for (declines: longer than its max_wait, or behind a
-- closed gate when it fails fast) is answered but not reserved: nothing is written.
-- ARGV: idle, attempt (unused), spread, claim_grace, pacing (0|1), threshold, min_remaining,
-- concurrency limit (0: off), lease_ttl (the cap's, or FLIGHT_TTL), poll, probes (requests a
-- key no answer has come back for lets go; 0: off), this coordinator's
-- id (counted among the live workers, KEYS[5], for WORKER_TTL seconds), herd_window, the
-- caller's max_wait ('': any), fail_fast (0|1), probe_unknown_limit (0|1), and optionally a seed
-- (limit, remaining, seconds to the reset): a quota observation to adopt when none is
-- stored (Redis came back empty), so the first window is not sent blind.
-- Returns {code go|gate|pace|busy, wait seconds, seconds until the gate opens, lease or '',
-- seconds until the window resets when its used-up count holds a pace wait (quota_hold) or
-- '', the live workers}.
local spread = finite(ARGV[3]) or 0
local grace = finite(ARGV[4]) or 0.5
local pacing = ARGV[5] == '1'
local threshold = finite(ARGV[6]) or 0
local min_remaining = finite(ARGV[7]) or 0
local limit = finite(ARGV[8]) or 0
local lease_ttl = finite(ARGV[9]) or 60
local poll = finite(ARGV[10]) or 0.05
local probes = finite(ARGV[11]) or 0
local me = ARGV[12] or ''
local herd_window = finite(ARGV[13]) or 1
local max_wait = finite(ARGV[14])
local fail_fast = ARGV[15] == '1'
local probe_unknown = ARGV[16] == '1'
local seed_limit, seed_left, seed_reset = finite(ARGV[17]), finite(ARGV[18]), finite(ARGV[19])
local state, slots, leases = KEYS[1], KEYS[2], KEYS[3]
-- optionally (after the seed, '' when none), the charge of a request that costs tokens:
-- tokens, input tokens, output tokens (tokens.lua)
local charge = nil
if finite(ARGV[20]) ~= nil then
  charge = {count(ARGV[20], 1e15) or 0, count(ARGV[21], 1e15) or 0, count(ARGV[22], 1e15) or 0}
end
-- optionally (after the charge, '' when none), this coordinator's late corrections of the
-- key's token ledgers (tokens_corrected: their number, then six values each), applied first
if ARGV[23] ~= nil then tokens_corrected(KEYS[6], KEYS[3], ARGS, 23) end  -- ARGS: this part's ARGV
-- a request that goes holds a lease while in flight
local tracked = limit > 0 or pacing or charge ~= nil

local in_flight = 0
if tracked then in_flight = live_leases(leases) end
if limit > 0 and in_flight >= limit then
  return {'busy', fmt(poll), '0', '', '', 0}  -- 0: the live workers not counted
end
-- its token quotas first (Ledgers.hold): a request they hold reserves nothing
local ledgers = nil
if charge ~= nil then
  local till
  till, ledgers = tokens_hold(KEYS[6], leases, charge, spread)
  if till ~= nil then return {'pace', fmt(till - NOW), '0', '', '', 0} end
end

-- the live workers: every coordinator that asked in the last WORKER_TTL seconds
local live = 0  -- not counted by this call (the client registers now and then)
if me ~= '' then
  rc('ZADD', KEYS[5], fmt(NOW), me)
  rc('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. fmt(NOW - WORKER_TTL))
  live = rc('ZCARD', KEYS[5])
  extend(KEYS[5], WORKER_TTL + 1)
end

local s = load(state, {'gate', 'tail', 'herd', 'remaining', 'limit', 'reset_at', 'quota', 'used',
                       'window', 'answered', 'rolled_at', 'first', 'booked_to'})
if seed_limit and seed_left and seed_reset and seed_reset > 0 and instant(s.reset_at) == nil
    and count(s.quota, 1e15) == nil and seed_left <= seed_limit then
  s.limit, s.remaining = string.format('%d', seed_limit), string.format('%d', seed_left)
  s.reset_at, s.quota = fmt(NOW + seed_reset), string.format('%d', seed_left)
  s.used = string.format('%d', seed_limit - seed_left)
  hset(state, 'limit', s.limit, 'remaining', s.remaining, 'reset_at', s.reset_at,
             'quota', s.quota, 'used', s.used)
end
local gate = instant(s.gate) or NEVER
local quota = rolled(state, s, in_flight)
local remaining = count(s.remaining, 1e15)
local reset_at = instant(s.reset_at)
-- quota_hold: the counted quota is used up until the reset (or, while no answer has named
-- the new window's reset, for one spread while requests are in flight); a key no answer has
-- come back for (its first window, nothing counted) holds for one spread once `probes`
-- requests are in flight, for PROBE_PATIENCE after its latest probe went (`first`); with
-- probe_unknown_limit on, a caller that waits (probe_waits: not fail_fast, and at least one
-- spread) is held so for SPAN after the first answer too, when it named no quota, until the
-- key's first throttle (still_probing: `answered` is its instant)
local hold = nil
local unnamed = false
local probed = instant(s.first)
local answered_at = instant(s.answered)
local probing = probe_unknown and answered_at ~= nil and not fail_fast
    and (max_wait == nil or max_wait >= spread) and instant(s.gate) == nil
    and NOW - answered_at >= 0 and NOW - answered_at < LR.SPAN
if pacing and quota == nil and count(s.limit, 1e15) == nil and probes > 0
    and in_flight >= probes and ((s.answered == nil and probed ~= nil
    and NOW - probed < PROBE_PATIENCE) or probing) then
  if spread > 0 then
    hold = NOW + spread
    unnamed = true
  end
elseif pacing and quota ~= nil and quota <= 0 then
  if reset_at ~= nil then
    if NOW < reset_at then hold = reset_at end
  elseif in_flight > 0 and spread > 0 then
    hold = NOW + spread
    unnamed = true
  end
end
-- the slots booked: the state records the latest ('none': none), so a key with none booked
-- reads none
local due, latest = {}, instant(s.booked_to)
if s.booked_to == 'none' then
  due = {}
elseif latest ~= nil and latest < NOW - grace then
  rc('DEL', slots)  -- every slot booked is past its grace
  hset(state, 'booked_to', 'none')
else
  rc('ZREMRANGEBYSCORE', slots, '-inf', '(' .. fmt(NOW - grace))
  due = rc('ZRANGEBYSCORE', slots, '-inf', fmt(NOW + EPSILON), 'WITHSCORES', 'LIMIT', 0, 1)
  if #due > 0 then rc('ZREM', slots, due[1]) end  -- claimed, or booked again below
  if latest == nil then  -- not recorded (garbage, or stored before it was): read once
    local last = rc('ZREVRANGEBYSCORE', slots, '+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
    hset(state, 'booked_to', last[2] and fmt(tonumber(last[2])) or 'none')
  end
end
if #due == 0 or NOW < gate or hold ~= nil then
  -- plan_slot: the key's first acquire, before any answer (its probe went then)
  local first = instant(s.first)
  local probe = first == nil and s.answered == nil
  if probe then first = NOW end  -- stored once the slot is taken
  -- pacing_interval
  local interval = 0
  if pacing and remaining ~= nil and reset_at ~= nil and NOW < reset_at then
    local quota_size = count(s.limit, 1e15)
    local low
    if quota_size ~= nil and quota_size > 0 then
      low = remaining <= threshold * quota_size
    else
      low = remaining <= min_remaining
    end
    if low then interval = (reset_at - NOW) / math.max(remaining, 1) end
  end
  -- _logic.learned_gap, at the latest slot (the next is spaced from it); for callers that
  -- wait only: a fail_fast caller is refused by what the provider said, never by a guess
  if pacing and not fail_fast then
    interval = math.max(interval, lr_gap(math.max(NOW, instant(s.tail) or NEVER)))
  end
  -- plan_slot
  local tail = instant(s.tail) or NEVER
  local herd = instant(s.herd) or NEVER
  local gated = NOW < gate
  local held = gated or hold ~= nil
  local slot = nil
  local herded = held
  if held then
    local at = math.max(NOW, gate, hold or NEVER)
    local size = count(s.limit, 1e15)
    if unnamed then
      slot, herded = at, false
    elseif size ~= nil then
      -- release_quota: a window reset by `at` admits its limit, else what its count allows
      local release_quota = size
      if reset_at ~= nil and at < reset_at - EPSILON then release_quota = quota end
      if release_quota ~= nil then
        local window = finite(s.window)
        if window ~= nil and (window <= 0 or window > HORIZON) then window = nil end
        -- booked_from: the slots already booked, from half a window before `at` on
        local from = at - EPSILON
        if window ~= nil then from = at - window / 2 end
        local booked = rc('ZCOUNT', slots, fmt(from), '+inf')
        -- release_slot: the first window from `at` on that holds fewer than its quota
        local step = nil
        if window ~= nil and release_quota > 0 then
          step = window
        elseif release_quota > 0 and instant(s.rolled_at) == nil and first ~= nil
            and at - first > EPSILON
            and reset_at ~= nil and math.abs(at - reset_at) <= EPSILON then
          -- before any window rolled over: the first request to the named reset is a lower
          -- bound of the window's length
          step = math.max(at - first, spread)
        end
        if step ~= nil then
          local windows, lo, left = 0, from, booked
          while true do  -- each window passed holds release_quota > 0 of the booked
            local hi = at + (windows + 0.5) * step
            local n = rc('ZCOUNT', slots, fmt(lo), '(' .. fmt(hi))
            if n < release_quota or left <= 0 then
              slot = at + windows * step
              break
            end
            windows, lo, left = windows + 1, hi, left - n
          end
        elseif booked < release_quota then
          slot = at
        else
          slot = at + math.max(spread, EPSILON * 2)  -- ask again once the release is answered
        end
        herded = false
      end
    end
  end
  if slot == nil then
    local herding = held or herd > NOW
    local spacing = interval
    if herding then spacing = math.max(interval, spread) end
    slot = NOW
    if spacing > 0 or held then
      local paced = tail + spacing
      local opens = math.max(NOW, gate, hold or NEVER)
      local bounded = fail_fast and interval <= 0  -- the quota unknown: one herd window
      if interval > 0 and reset_at ~= nil and paced > reset_at then
        paced = math.max(reset_at, tail + spread)  -- the window has reset by then
        opens, spacing, bounded = math.max(opens, reset_at), spread, fail_fast
      end
      slot = math.max(opens, paced)
      if bounded and slot > opens + herd_window then
        -- herd_slot: a fail_fast worker is placed within one herd window; beyond, it
        -- shares its slots in turn, counted by the slots reserved in it
        slot = opens
        if herd_window > 0 and spacing > 0 then
          local booked = rc('ZCOUNT', slots, fmt(opens - EPSILON),
                               fmt(opens + herd_window + EPSILON))  -- one at its edge too
          slot = opens + math.fmod(booked * spacing, herd_window)
        end
      end
    end
  end
  local wait, answer = slot - NOW, nil
  if slot > NOW + EPSILON then
    local reset_in = ''
    if hold ~= nil and not unnamed then reset_in = fmt(hold - NOW) end
    answer = {'pace', fmt(wait), '0', '', reset_in, live}
    if gated then answer = {'gate', fmt(wait), fmt(gate - NOW), '', reset_in, live} end
    if (gated and fail_fast) or (max_wait ~= nil and wait > max_wait) then
      -- a due slot it claimed is not its to give up: reserved again as it was
      if #due > 0 then rc('ZADD', slots, due[2], due[1]) end
      DIRTY.booked_to, DIRTY.x_workers = nil, nil  -- records only: read again next time
      return answer  -- declines: it stops, nothing reserved
    end
  end
  if probe then hset(state, 'first', fmt(NOW)) end
  hset(state, 'tail', fmt(math.max(tail, slot)))
  if herded then hset(state, 'herd', fmt(math.max(herd, slot))) end  -- held
  extend(state, math.max(IDLE, slot - NOW) + 1)
  if answer ~= nil then
    rc('ZADD', slots, fmt(slot), next_id(state))
    if slot > (instant(fields_of().booked_to) or NEVER) then hset(state, 'booked_to', fmt(slot)) end
    extend(slots, slot - NOW + grace + 1)
    return answer
  end
end

local lease = ''
if tracked then
  -- sent: one less in the window's count; in the first window, a request past the latest
  -- probe's PROBE_PATIENCE is another probe
  if pacing and s.answered == nil then
    local latest = instant(fields_of().first)
    if latest == nil or NOW - latest >= PROBE_PATIENCE then hset(state, 'first', fmt(NOW)) end
  end
  if pacing then lr_counted() end  -- _logic.send_counted
  if quota ~= nil and pacing then
    hset(state, 'quota', string.format('%d', math.max(quota - 1, 0)))
    local used = count(s.used, 1e15)
    if used ~= nil then hset(state, 'used', string.format('%d', used + 1)) end
  end
  lease = 'r:' .. next_id(state)
  if charge ~= nil then  -- Ledgers.charged: the charge named by the lease, counted
    lease = lease .. string.format(':%d:%d:%d', charge[1], charge[2], charge[3])
    for i = 1, 3 do ledger_charged(ledgers[i], charge[i]) end
    ledgers_save(KEYS[6], ledgers)
  end
  lease_given(leases, lease, lease_ttl)
end
return {'go', '0', '0', lease, '', live}
