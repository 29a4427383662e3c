-- sliding_window.lua: the sliding-window counter, mirroring
-- slidingWindow, slidingCounts, slidingDecide, slidingWait and
-- slidingCarryWait in algorithms/slidingwindow.go line by line.
--
-- sliding_window(requests, a, b, c, start, w, w2, curr, prev, now_ms,
-- cost, debt): a, b, c the state (window start, its count, the previous
-- window's count; 0, 0, 0 for none); results as counter.lua's. A fixed
-- period of w ms passes start nil: the window holding now and its counts
-- come from the state (slidingWindow, slidingCounts), and a debt carries
-- into later windows. A calendar period (counter.lua's calendar) passes
-- its window's start, its length w, the next one's w2 and the counts
-- curr and prev (slidingDecide), and a debt does not carry. The estimate
-- is curr + prev * (w - e) / w, e ms into the window; sums are kept
-- multiplied by w.

local function sliding_window(requests, a, b, c, start, w, w2, curr, prev, now, cost, debt)
  local carry = start == nil
  if carry then
    w2 = w
    local r = now % w -- the window's start, quo's steps
    if r < 0 then
      r = r + w
    end
    start, curr, prev = now - r, 0, 0
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
    return allowed, remaining, retry, reset, ttl, a, b, c, unrecorded, owed
  end
  return allowed, remaining, retry, reset, ttl, start, curr, prev, unrecorded, owed
end
