-- _logic._learned: a send rate learned from throttles that name no quota (appended to the
-- prelude). Its state lives in the state hash, read with its other fields: lr_peak, lr_cut
-- (the peak and when it was cut), lr_sent, lr_before, lr_since (the requests that went in
-- the current bucket, SPAN long from lr_since, and in the one before).

local LR = {BETA = __BETA__, SCALE = __SCALE__, SPAN = __SPAN__, HOLD = __HOLD__,
            QUIET = __QUIET__, STEP = __STEP__, FORGET = __FORGET__, FLOOR = __FLOOR__,
            CEILING = __CEILING__, MARGIN = __MARGIN__, MIN_PEAK = __MIN_PEAK__}
for _, f in ipairs({'lr_peak', 'lr_cut', 'lr_sent', 'lr_before', 'lr_since'}) do
  FIELDS[#FIELDS + 1] = f
end

-- The key's Learned value (garbage counts as absent).
local function lr_load()
  local c = fields_of()
  local peak = finite(c.lr_peak)
  if peak ~= nil and (peak <= 0 or peak > LR.CEILING) then peak = nil end
  return {peak = peak, cut = instant(c.lr_cut) or NEVER, sent = count(c.lr_sent, 1e12) or 0,
          before = count(c.lr_before, 1e12) or 0, since = instant(c.lr_since) or NEVER}
end

-- _learned._rolled: the buckets moved on to the one holding NOW.
local function lr_rolled(l)
  if NOW - l.since < LR.SPAN then return end
  if NOW - l.since < 2 * LR.SPAN then
    l.sent, l.before, l.since = 0, l.sent, l.since + LR.SPAN
  else
    l.sent, l.before, l.since = 0, 0, NOW
  end
end

local function lr_store(l, ...)
  hset(KEYS[1], 'lr_sent', string.format('%d', l.sent), 'lr_before',
       string.format('%d', l.before), 'lr_since', fmt(l.since), ...)
end

-- _logic.send_counted: one request went now.
local function lr_counted()
  local l = lr_load()
  lr_rolled(l)
  l.sent = l.sent + 1
  lr_store(l)
end

-- _logic.learned_rate: requests per second the key may send at `at` (nil: not paced).
local function lr_rate(l, at)
  if l.peak == nil then return nil end
  local since = math.max(0, at - l.cut)
  local k = (l.peak * (1 - LR.BETA) / LR.SCALE) ^ (1 / 3)
  local rate
  if since < k then
    rate = LR.SCALE * (since - k) ^ 3 + l.peak
  else
    rate = l.peak * (1 + LR.STEP * math.floor((since - k) / LR.QUIET))
    if rate >= LR.FORGET * l.peak then return nil end
  end
  return math.min(math.max(rate, LR.FLOOR), LR.CEILING)
end

-- _logic.learned_gap: seconds between two requests the learned rate allows from `at` on (0:
-- not paced).
local function lr_gap(at)
  local rate = lr_rate(lr_load(), at)
  if rate == nil then return 0 end
  return 1 / rate
end

-- _logic.rate_cut: a throttle that named no quota came now.
local function lr_cut()
  local l = lr_load()
  if l.peak ~= nil and NOW - l.cut >= 0 and NOW - l.cut < LR.HOLD then
    hset(KEYS[1], 'lr_peak', fmt(math.max(l.peak - 1 / LR.SPAN, LR.FLOOR)))  -- same burst
    return
  end
  local current = lr_rate(l, NOW)
  lr_rolled(l)
  local inside = math.max(0, 1 - (NOW - l.since) / LR.SPAN)
  local admitted = ((l.sent + l.before * inside) / LR.SPAN - 1 / LR.SPAN) * (1 - LR.MARGIN)
  if current ~= nil then admitted = math.min(admitted, current) end
  if admitted < LR.MIN_PEAK then return end
  lr_store(l, 'lr_peak', fmt(math.min(math.max(admitted, LR.FLOOR), LR.CEILING)),
           'lr_cut', fmt(NOW))
end
