-- sliding_window.lua: the sliding-window counter, mirroring
-- decideSlidingWindow and slidingWait in algorithms/slidingwindow.go line
-- by line.
--
-- Called by batch.lua, not by Redis directly; batch.lua's header gives the
-- script's KEYS, ARGV and reply.
--
-- sliding_window(requests, period_ms, s, now_ms, cost) -> s2, d
--   requests, period_ms  the limit
--   s       {a = window start (Unix ms, a multiple of period_ms), b = count
--           in that window, c = count in the window before}; {0, 0, 0} for
--           a key never seen
--   now_ms  Unix time in ms
--   cost    > 0 spends, 0 looks, < 0 refunds (already clamped by decide)
--   s2      the new state; s itself on a deny or when cost is 0
--   d       new_decision fields, durations in ms
--
-- Redis state: one string, pack_state(window, curr, prev).

-- sliding_wait is the smallest wait in ms after which cost fits, for counts
-- curr and prev at e ms into a window of w ms, with limit = requests * w.
local function sliding_wait(curr, prev, cost, w, e, limit)
  if prev > 0 then
    -- Within this window: curr*w + prev*(w-e-d) + cost*w <= limit.
    local over = curr * w + prev * (w - e) + cost * w - limit
    local d = ceil_div(over, prev)
    if e + d < w then
      return d
    end
  end
  -- After the roll, e2 ms into the next window: curr*(w-e2) + cost*w <= limit.
  local e2 = 0
  local over = curr * w + cost * w - limit
  if over > 0 then
    e2 = ceil_div(over, curr)
  end
  return w - e + e2
end

local function sliding_window(requests, period_ms, s, now, cost)
  local w = period_ms
  local start = quo(now, w) * w
  local curr, prev = 0, 0
  if s.a - quo(s.a, w) * w ~= 0 then
    -- a window of another period: the limit changed
  elseif s.a == start then
    curr, prev = s.b, s.c
  elseif s.a == start - w then
    prev = s.b
  elseif s.a > start then -- the clock went back: stay at the stored window's start
    start, curr, prev = s.a, s.b, s.c
  end
  local at = math.max(now, start) -- the moment decided, >= now
  local e = at - start -- elapsed in the current window
  local limit = requests * w
  local weighted = curr * w + prev * (w - e)

  local d = new_decision(requests)
  if cost > 0 and weighted + cost * w > limit then
    d.allowed = 0
    d.retry = at - now + sliding_wait(curr, prev, cost, w, e, limit)
  elseif cost > 0 then
    curr = curr + cost
    weighted = weighted + cost * w
  elseif cost < 0 then
    local refund = -cost
    local take = math.min(curr, refund)
    curr = curr - take
    prev = math.max(0, prev - (refund - take))
    weighted = curr * w + prev * (w - e)
  end
  d.remaining = math.max(0, quo(limit - weighted, w))
  if curr > 0 then
    d.reset = at - now + 2 * w - e
  elseif prev > 0 then
    d.reset = at - now + w - e
  end
  d.ttl = d.reset
  if d.ttl == 0 and at > now then
    -- The clock went back: an empty window ahead of now still decides
    -- differently from no state until the clock reaches it.
    d.ttl = at - now
  end
  if d.allowed == 0 or cost == 0 then
    return s, d
  end
  return {a = start, b = curr, c = prev}, d
end
