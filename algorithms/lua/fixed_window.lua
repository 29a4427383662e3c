-- fixed_window.lua: the fixed window, mirroring decideFixedWindow in
-- algorithms/fixedwindow.go line by line.
--
-- Called by batch.lua, not by Redis directly; batch.lua's header gives the
-- script's KEYS, ARGV and reply.
--
-- fixed_window(requests, period_ms, s, now_ms, cost) -> s2, d
--   requests, period_ms  the limit
--   s       {a = window start (Unix ms, a multiple of period_ms), b = count, c = 0};
--           {0, 0, 0} for a key never seen
--   now_ms  Unix time in ms
--   cost    > 0 spends, 0 looks, < 0 refunds (already clamped by decide)
--   s2      the new state; s itself on a deny or when cost is 0
--   d       new_decision fields, durations in ms
--
-- Redis state: one string, pack_state(window, count, 0).

local function fixed_window(requests, period_ms, s, now, cost)
  local w = period_ms
  local start = quo(now, w) * w
  local count = 0
  if s.a - quo(s.a, w) * w ~= 0 then
    -- a window of another period: the limit changed
  elseif s.a == start then
    count = s.b
  elseif s.a > start then -- the clock went back: stay in the stored window
    start, count = s.a, s.b
  end
  local stop = start + w - now

  local d = new_decision(requests)
  if cost > 0 and count + cost > requests then
    d.allowed = 0
    d.retry = stop
  elseif cost > 0 then
    count = count + cost
  elseif cost < 0 then
    count = math.max(0, count + cost)
  end
  d.remaining = math.max(0, requests - count)
  if count > 0 then
    d.reset = stop
  end
  d.ttl = d.reset
  if d.ttl == 0 and start > now then
    -- The clock went back: an empty window ahead of now still decides
    -- differently from no state until the clock reaches it.
    d.ttl = start - now
  end
  if d.allowed == 0 or cost == 0 then
    return s, d
  end
  return {a = start, b = count, c = 0}, d
end
