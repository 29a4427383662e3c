-- sliding_window.lua: the sliding-window counter, mirroring
-- decideSlidingWindow, slidingDecide and slidingWait (written out in the
-- deny branch) in algorithms/slidingwindow.go line by line.
--
-- sliding_window(requests, period_ms, a, b, c, now_ms, cost)
--     -> allowed, remaining, retry, reset, ttl, a2, b2, c2
--   a, b, c the state: window start (Unix ms, a multiple of period_ms),
--           count in that window, count in the window before; 0, 0, 0 for
--           a key never seen
--   the rest as token_bucket.lua
--
-- sliding_decide(requests, a, b, c, start, w, w2, curr, prev, now_ms, cost)
-- decides in the window starting at start, w ms long and followed by one
-- of w2 ms, with counts curr and prev (a, b, c the state as stored): the
-- part a fixed period (w == w2) and a calendar period (counter.lua's
-- decide_calendar) share. The estimate is curr + prev * (w - e) / w with e
-- ms of the window elapsed; sums are kept multiplied by w, and after the
-- roll into the next window (where curr is prev) by w2.

local function sliding_decide(requests, a, b, c, start, w, w2, curr, prev, now, cost)
  local at = now -- the moment decided, >= now
  if start > now then
    at = start
  end
  local e = at - start -- elapsed in the current window
  local limit = requests * w
  local weighted = curr * w + prev * (w - e)

  local allowed, retry, reset = 1, 0, 0
  if cost > 0 and weighted + cost * w > limit then
    allowed = 0
    -- slidingWait: the smallest wait after which cost fits.
    local wait = -1
    if prev > 0 then
      -- Within this window: curr*w + prev*(w-e-d) + cost*w <= limit.
      local over = curr * w + prev * (w - e) + cost * w - limit
      local d = quo(over + prev - 1, prev)
      if e + d < w then
        wait = d
      end
    end
    if wait < 0 then
      -- After the roll, e2 ms into the next window (curr is its prev):
      -- curr*(w2-e2) + cost*w2 <= requests*w2.
      local e2 = 0
      local over = curr * w2 + cost * w2 - requests * w2
      if over > 0 then
        e2 = quo(over + curr - 1, curr)
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
  local remaining = 0 -- max(0, quo(limit - weighted, w))
  if limit > weighted then
    local x = limit - weighted
    local rx = x % w
    if rx < 0 then
      rx = rx + w
    end
    remaining = (x - rx) / w
  end
  if curr > 0 then
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
  if allowed == 0 or cost == 0 then
    return allowed, remaining, retry, reset, ttl, a, b, c
  end
  return allowed, remaining, retry, reset, ttl, start, curr, prev
end

local function sliding_window(requests, period_ms, a, b, c, now, cost)
  local w = period_ms
  -- quo(now, w) * w and a - quo(a, w) * w, written out as in lib.lua's
  -- quo (now >= 0; a's remainder is only compared with 0).
  local r = now % w
  if r < 0 then
    r = r + w
  end
  local start = now - r
  local ra = a % w
  if ra < 0 then
    ra = ra + w
  end
  local curr, prev = 0, 0
  if ra ~= 0 then
    -- a window of another period: the limit changed
  elseif a == start then
    curr, prev = b, c
  elseif a == start - w then
    prev = b
  elseif a > start then -- the clock went back: stay at the stored window's start
    start, curr, prev = a, b, c
  end
  return sliding_decide(requests, a, b, c, start, w, w, curr, prev, now, cost)
end
