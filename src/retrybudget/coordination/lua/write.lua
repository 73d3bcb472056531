-- write: the spacing of a provider key's writes (mirrors _logic.write_wait, and the go that
-- records the write). KEYS[1] the key's latest-write string. ARGV: idle, gap (seconds).
-- Returns the seconds this write waits, as text ('0': it goes now, recorded as the latest).
local gap = finite(ARGV[2]) or 0
if gap <= 0 then return '0' end
local last = instant(redis.call('GET', KEYS[1])) or NEVER
local wait = last + gap - NOW
if wait > EPSILON then return fmt(wait) end
redis.call('SET', KEYS[1], fmt(NOW), 'EX', math.max(math.ceil(gap) + 1, math.ceil(IDLE)))
return '0'
