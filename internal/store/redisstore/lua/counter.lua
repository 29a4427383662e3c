-- counter.lua: decide_counter mirrors algorithms.DecideMs for the three
-- algorithms whose state is three integers (token bucket, sliding window,
-- fixed window).
--
-- decide_counter(alg, requests, period_ms, burst, a, b, c, now_ms, cost, debt)
--     -> limit, allowed, remaining, retry, reset, ttl, a2, b2, c2, unrecorded, owed
-- (see token_bucket.lua). A cost above the capacity is decided as a look
-- and denied with retry -1 (never), unless debt is 1 (algorithms.Debt:
-- charged, bounded); a refund beyond it is clamped. The drivers pass no
-- debt (nil): only the settle script charges debt.

local function decide_counter(alg, requests, period_ms, burst, a, b, c, now, cost, debt)
  local cap = requests -- Limit.Capacity
  if alg == 1 and burst > 0 then
    cap = burst
  end
  local never = false
  if cost > cap and debt ~= 1 then
    cost, never = 0, true
  elseif cost < -cap then
    cost = -cap
  end
  local allowed, remaining, retry, reset, ttl, a2, b2, c2, unrecorded, owed
  if alg == 1 then -- ALG_TOKEN_BUCKET
    allowed, remaining, retry, reset, ttl, a2, b2, c2, unrecorded, owed = token_bucket(requests, period_ms, burst, a, b, c, now, cost, debt)
  elseif alg == 2 then -- ALG_SLIDING_WINDOW
    allowed, remaining, retry, reset, ttl, a2, b2, c2, unrecorded, owed = sliding_window(requests, period_ms, a, b, c, now, cost, debt)
  else
    allowed, remaining, retry, reset, ttl, a2, b2, c2, unrecorded, owed = fixed_window(requests, period_ms, a, b, now, cost, debt)
  end
  if never then
    allowed, retry = 0, -1
  end
  return cap, allowed, remaining, retry, reset, ttl, a2, b2, c2, unrecorded, owed
end
