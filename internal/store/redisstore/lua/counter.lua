-- counter.lua: decide_counter mirrors algorithms.DecideMs for the three
-- algorithms whose state is three integers (token bucket, sliding window,
-- fixed window, leaky bucket).
--
-- decide_counter(alg, requests, period_ms, burst, a, b, c, now_ms, cost, flags)
--     -> limit, allowed, remaining, retry, reset, ttl, a2, b2, c2, wait
-- (see token_bucket.lua and leaky_bucket.lua; flags the request's flags,
-- of which only the no-wait bit matters here; wait is 0 but for the leaky
-- bucket). A cost above the capacity is decided as a look and denied with
-- retry -1 (never) and wait 0; a refund beyond it is clamped.

local function decide_counter(alg, requests, period_ms, burst, a, b, c, now, cost, flags)
  local cap = requests -- Limit.Capacity
  if (alg == 1 or alg == 5) and burst > 0 then
    cap = burst
  end
  local never = false
  if cost > cap then
    cost, never = 0, true
  elseif cost < -cap then
    cost = -cap
  end
  local allowed, remaining, retry, reset, ttl, a2, b2, c2
  local wait = 0
  if alg == 5 then -- ALG_LEAKY_BUCKET; no-wait is flag bit 2
    allowed, remaining, retry, reset, ttl, a2, b2, c2, wait = leaky_bucket(requests, period_ms, burst, a, b, c, now, cost, flags % 8 >= 4)
  elseif alg == 1 then -- ALG_TOKEN_BUCKET
    allowed, remaining, retry, reset, ttl, a2, b2, c2 = token_bucket(requests, period_ms, burst, a, b, c, now, cost)
  elseif alg == 2 then -- ALG_SLIDING_WINDOW
    allowed, remaining, retry, reset, ttl, a2, b2, c2 = sliding_window(requests, period_ms, a, b, c, now, cost)
  else
    allowed, remaining, retry, reset, ttl, a2, b2, c2 = fixed_window(requests, period_ms, a, b, now, cost)
  end
  if never then
    allowed, retry, wait = 0, -1, 0
  end
  return cap, allowed, remaining, retry, reset, ttl, a2, b2, c2, wait
end
