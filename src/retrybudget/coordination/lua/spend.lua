-- budget_withdraw. ARGV: idle, ratio, min_retries_per_sec, ttl. Returns 1 allowed, 0 refused.
local ratio = finite(ARGV[2]) or 0
local min_rps = finite(ARGV[3]) or 0
local ttl = finite(ARGV[4]) or 10
local current, deposits, withdrawals, fresh = budget_live(KEYS[4], ttl)
local balance = min_rps * ttl + ratio * deposits - withdrawals
if balance < 1 - 1e-9 then
  return 0
end
budget_add(KEYS[4], ttl, 'w', current, fresh)
return 1
