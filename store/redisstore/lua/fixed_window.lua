-- fixed_window.lua: the fixed window, mirroring fixedWindow, fixedCount
-- and fixedDecide in algorithms/fixedwindow.go line by line.
--
-- fixed_window(requests, period_ms, a, b, now_ms, cost, debt)
--     -> allowed, remaining, retry, reset, ttl, a2, b2, c2, unrecorded, owed
--   a, b    the state: window start (Unix ms, a multiple of period_ms),
--           count; 0, 0 for a key never seen (c is not the algorithm's:
--           lib.lua's write_counter keeps the key's expiry there; the
--           results' c2 is 0)
--   the rest as counter.lua's decide_counter
--
-- fixed_decide(requests, start, stop, carry, count, a, b, now_ms, cost,
-- debt) decides in the window [start, stop) holding count (a, b the state
-- as stored), the part a fixed period and a calendar period (counter.lua's
-- decide_calendar) share; carry is the length of the window a debt is
-- carried into, 0 when it is not (no window carries one: a fixed window
-- and a calendar period start afresh at their boundary).

local function fixed_decide(requests, start, stop, carry, count, a, b, now, cost, debt)
  stop = stop - now
  local allowed, retry, reset, unrecorded = 1, 0, 0, 0
  if debt == 1 and cost > 0 then
    local k = 2 * requests - count
    if k > cost then
      k = cost
    elseif k < 0 then
      k = 0
    end
    count = count + k
    unrecorded = cost - k
  elseif cost > 0 and count + cost > requests then
    allowed = 0
    retry = stop
    if count + cost > 2 * requests then -- in debt: the carry fits a window later
      retry = stop + carry
    end
  elseif cost > 0 then
    count = count + cost
  elseif cost < 0 then
    count = count + cost
    if count < 0 then
      count = 0
    end
  end
  local remaining = requests - count
  if remaining < 0 then
    remaining = 0
  end
  if count > 0 then
    reset = stop
    if count > requests then -- in debt: empty a window later
      reset = stop + carry
    end
  end
  local ttl = reset
  if ttl == 0 and start > now then
    -- The clock went back: an empty window ahead of now still decides
    -- differently from no state until the clock reaches it.
    ttl = start - now
  end
  local owed = count - requests
  if owed < 0 then
    owed = 0
  end
  if allowed == 0 or cost == 0 then
    return allowed, remaining, retry, reset, ttl, a, b, 0, unrecorded, owed
  end
  return allowed, remaining, retry, reset, ttl, start, count, 0, unrecorded, owed
end

local function fixed_window(requests, period_ms, a, b, now, cost, debt)
  local w = period_ms
  local start, ra = window_of(now, a, w)
  local count = 0
  if ra ~= 0 then
    -- a window of another period: the limit changed
  elseif a == start then
    count = b
  elseif a > start then -- the clock went back: stay in the stored window
    start, count = a, b
  end -- an older window: this one starts afresh (a debt is not carried)
  if count > 2 * requests then -- a debt of one capacity at most
    count = 2 * requests
  end
  return fixed_decide(requests, start, start + w, 0, count, a, b, now, cost, debt)
end
