-- counter.lua: decide_counter mirrors algorithms.DecideMs for the four
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

-- decide_calendar mirrors algorithms.DecideCalendar (its results are
-- decide_counter's, wait always 0): a calendar limit of
-- the sliding window (alg 2) or the fixed window (alg 4), decided at now
-- on the boundaries b0 < b1 < b2 < b3 < b4 floodgate computed from its own
-- clock (Bounds: [b1, b2) held floodgate's now). The period is [b1, b2)
-- for a now before b2 (decided at b1 if now is before it), [b2, b3) for a
-- now past b2; a now at or past b3, or a state starting at b3 while
-- deciding [b2, b3), is out of range: every charge denied with retry 1000
-- ms, nothing changed. A state start (a) that is no boundary of the
-- decided period counts as an empty window.
local function decide_calendar(alg, requests, b0, b1, b2, b3, b4, a, b, c, now, cost)
  local cap = requests
  local never = false
  if cost > cap then
    cost, never = 0, true
  elseif cost < -cap then
    cost = -cap
  end
  local prev, start, stop, nxt, after = b0, b1, b2, b3, b4
  local roll = now >= b2
  if roll then
    prev, start, stop, nxt, after = b1, b2, b3, b4, 0
  end
  if now >= b3 or (roll and a == b3) then
    local allowed, retry = 1, 0
    if cost > 0 or never then
      allowed, retry = 0, 1000
    end
    if never then
      retry = -1
    end
    return cap, allowed, 0, retry, 1000, b4 - b1, a, b, c, 0
  end
  local allowed, remaining, retry, reset, ttl, a2, b2_, c2
  if alg == 2 then -- ALG_SLIDING_WINDOW
    local curr, last = 0, 0
    if a == start then
      curr, last = b, c
    elseif a == prev then
      last = b
    elseif a == stop then -- the clock went back across the boundary
      start, stop, nxt = stop, nxt, after
      curr, last = b, c
    end
    allowed, remaining, retry, reset, ttl, a2, b2_, c2 = sliding_decide(requests, a, b, c, start, stop - start, nxt - stop, curr, last, now, cost)
  else
    local count = 0
    if a == start then
      count = b
    elseif a == stop then -- the clock went back across the boundary
      start, stop = stop, nxt
      count = b
    end
    allowed, remaining, retry, reset, ttl, a2, b2_, c2 = fixed_decide(requests, start, stop, count, a, b, now, cost)
  end
  if never then
    allowed, retry = 0, -1
  end
  return cap, allowed, remaining, retry, reset, ttl, a2, b2_, c2, 0
end
