-- sliding_window.lua: the sliding-window counter, mirroring
-- slidingWindow, slidingCounts, slidingDecide, slidingWait and
-- slidingCarryWait in algorithms/slidingwindow.go line by line, and for
-- a calendar limit the sliding window's part of decideCalendar in
-- algorithms/calendar.go.
--
-- sliding_window(requests, period_ms, burst, a, b, c, now_ms, cost,
-- flags, debt, b0, b1, b2, b3, b4): a, b, c the state (window start, its
-- count, the previous window's count; 0, 0, 0 for none); a calendar
-- limit's boundaries b0 < .. < b4 (b0 nil for a fixed period); burst
-- and flags unused (counter.lua's one signature); results as
-- counter.lua's (wait 0). A fixed period: the window holding now and
-- its counts come from the state (slidingWindow, slidingCounts), and a
-- debt carries into later windows. A calendar period is [b1, b2) for a
-- now before b2 (decided at b1 if before it), else [b2, b3); a now at or
-- past b3, or a state starting at b3 while deciding [b2, b3), is out of
-- range: a charge is denied with retry 1000 ms, nothing changed (a debt:
-- allowed, all unrecorded). A state start that is no boundary of the
-- period counts as empty, and a debt is not carried past the period's
-- end. Then the decision in the window (slidingDecide): the estimate is
-- curr + prev * (w - e) / w, e ms into the window of w ms followed by
-- one of w2; sums are kept multiplied by w.

local function sliding_window(requests, period_ms, _, a, b, c, now, cost, _, debt, b0, b1, b2, b3, b4)
  local start, w, w2, carry, curr, prev = 0, period_ms, period_ms, true, 0, 0
  if b0 == nil then -- a fixed period: the window holding now
    local r = now % w -- the window's start, quo's steps
    if r < 0 then
      r = r + w
    end
    start = now - r
    if a % w ~= 0 then
      -- a window of another period: the limit changed
    elseif a == start then
      curr, prev = b, c
    elseif a > start then -- the clock went back: stay at the stored window's start
      start, curr, prev = a, b, c
    elseif b <= requests then -- no debt: the count weighs on the next window only
      if a == start - w then
        prev = b
      end
    else -- a debt, carried: requests repaid each window since (slidingCounts)
      local j = quo(start - a, w)
      local n = quo(b + requests - 1, requests) -- windows the count lasts
      if j < n then
        curr = b - j * requests
      end
      if j - 1 < n then
        prev = b - (j - 1) * requests
        if prev > requests then
          prev = requests
        end
      end
    end
    if curr > 2 * requests then -- a debt of one capacity at most
      curr = 2 * requests
    end
    if prev > 2 * requests then
      prev = 2 * requests
    end
  else -- a calendar period (decideCalendar's part)
    local before, stop, nxt, after = b0, b2, b3, b4
    start = b1
    local roll = now >= b2
    if roll then
      before, start, stop, nxt, after = b1, b2, b3, b4, 0
    end
    if now >= b3 or (roll and a == b3) then
      local allowed, retry, unrecorded = 1, 0, 0
      if debt == 1 and cost > 0 then
        unrecorded = cost
      elseif cost > 0 then
        allowed, retry = 0, 1000
      end
      return allowed, 0, retry, 1000, b4 - b1, a, b, c, 0, unrecorded, 0
    end
    if a == start then
      curr, prev = b, c
    elseif a == before then
      -- The previous period weighs with at most its quota: a debt does
      -- not roll over.
      prev = b
      if prev > requests then
        prev = requests
      end
    elseif a == stop then -- the clock went back across the boundary
      start, stop, nxt = stop, nxt, after
      curr, prev = b, c
    end
    w, w2, carry = stop - start, nxt - stop, false
  end
  local at = now -- the moment decided, >= now
  if start > now then
    at = start
  end
  local e = at - start -- elapsed in the current window
  local limit = requests * w
  local weighted = curr * w + prev * (w - e)

  local allowed, retry, reset, unrecorded = 1, 0, 0, 0
  if debt == 1 and cost > 0 then
    local k = quo(2 * limit - weighted, w)
    if k > cost then
      k = cost
    elseif k < 0 then
      k = 0
    end
    curr = curr + k
    weighted = weighted + k * w
    unrecorded = cost - k
  elseif cost > 0 and weighted + cost * w > limit then
    allowed = 0
    -- The smallest wait after which cost fits.
    local wait = -1
    if prev > 0 then
      -- Within this window: curr*w + prev*(w-e-d) + cost*w <= limit.
      local over = curr * w + prev * (w - e) + cost * w - limit
      local d = quo(over + prev - 1, prev)
      if e + d < w then
        wait = d
      end
    end
    if wait < 0 and carry then
      -- slidingCarryWait. In the i-th window after this one: its own
      -- count is the carried ci = max(0, curr - i*r), the one before it
      -- keeps pi = min(r, curr - (i-1)*r); the first i where
      -- ci + cost <= r, then e2 ms into it: ci*w + pi*(w-e2) + cost*w <= limit.
      local i = quo(curr + cost - requests + requests - 1, requests)
      if i < 1 then
        i = 1
      end
      local ci = curr - i * requests
      if ci < 0 then
        ci = 0
      end
      local pi = curr - (i - 1) * requests
      if pi > requests then
        pi = requests
      elseif pi < 0 then
        pi = 0
      end
      local e2 = 0
      local over = ci * w + pi * w + cost * w - limit
      if over > 0 then
        e2 = quo(over + pi - 1, pi)
      end
      wait = w - e + (i - 1) * w + e2
    elseif wait < 0 then
      -- slidingWait. After the roll, e2 ms into the next window, where
      -- curr is the previous count, at most requests (a calendar
      -- period's debt does not roll over): c*(w2-e2) + cost*w2 <= requests*w2.
      local cc = curr
      if cc > requests then
        cc = requests
      end
      local e2 = 0
      local over = cc * w2 + cost * w2 - requests * w2
      if over > 0 then
        e2 = quo(over + cc - 1, cc)
      end
      wait = w - e + e2
    end
    retry = at - now + wait
  elseif cost > 0 then
    curr = curr + cost
    weighted = weighted + cost * w
  elseif cost < 0 then
    local refund = -cost
    local take = refund
    if curr < take then
      take = curr
    end
    curr = curr - take
    prev = prev - (refund - take)
    if prev < 0 then
      prev = 0
    end
    weighted = curr * w + prev * (w - e)
  end
  local remaining = 0 -- max(0, quo(limit - weighted, w)), quo's steps
  if limit > weighted then
    local x = limit - weighted
    local r = x % w
    if r < 0 then
      r = r + w
    end
    remaining = (x - r) / w
  end
  if curr > requests and carry then -- in debt: empty a window later
    reset = at - now + 3 * w - e
  elseif curr > 0 then
    reset = at - now + w - e + w2
  elseif prev > 0 then
    reset = at - now + w - e
  end
  local ttl = reset
  if ttl == 0 and at > now then
    -- The clock went back: an empty window ahead of now still decides
    -- differently from no state until the clock reaches it.
    ttl = at - now
  end
  local owed = 0 -- min(ceil((weighted - limit) / w), requests)
  if weighted > limit then
    owed = quo(weighted - limit + w - 1, w)
    if owed > requests then
      owed = requests
    end
  end
  if allowed == 0 or cost == 0 then
    return allowed, remaining, retry, reset, ttl, a, b, c, 0, unrecorded, owed
  end
  return allowed, remaining, retry, reset, ttl, start, curr, prev, 0, unrecorded, owed
end
