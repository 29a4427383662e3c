-- counter.lua: decide_counter mirrors algorithms.DecideMode (and, for a
-- calendar limit, DecideCalendarMode) for the four algorithms whose state
-- is three integers (token bucket, sliding window, fixed window, leaky
-- bucket).
--
-- decide_counter(alg, x, y, z, a, b, c, now_ms, cost, flags, b0, b1, b2, b3, b4)
--     -> limit, allowed, remaining, retry, reset, ttl, a2, b2, c2, wait, unrecorded, owed
-- x, y, z are the limit's numbers as the wire carries them (lib.lua):
-- per_ms, scale and capacity for the buckets, requests and period_ms
-- for the windows. flags are the request's flags (lib.lua) without the
-- calendar bit: bit 1 debt (algorithms.Debt: a positive cost is charged
-- even when it does not fit, bounded; unrecorded is the part beyond the
-- bound, owed the debt after), bit 2 no-wait (the leaky bucket's). b0 is
-- nil but for a calendar limit, whose boundaries b0..b4 are (see
-- calendar). wait is 0 but for the leaky bucket. A cost above the
-- capacity is decided as a look and denied with retry -1 (never) and wait
-- 0, unless it is a debt; a refund beyond it is clamped. The rest is
-- token_bucket.lua's.

-- calendar mirrors the calendar part of algorithms.DecideCalendarMode
-- (results as token_bucket.lua's; cost already clamped): a calendar limit of
-- the sliding window (alg 2) or the fixed window (alg 4), decided at now
-- on the boundaries b0 < b1 < b2 < b3 < b4 floodgate computed from its own
-- clock (Bounds: [b1, b2) held floodgate's now). The period is [b1, b2)
-- for a now before b2 (decided at b1 if now is before it), [b2, b3) for a
-- now past b2; a now at or past b3, or a state starting at b3 while
-- deciding [b2, b3), is out of range: every charge denied with retry 1000
-- ms, nothing changed (a debt: allowed, all of it unrecorded). A state
-- start (a) that is no boundary of the decided period counts as an empty
-- window. A debt is not carried past the period's end.
local function calendar(alg, requests, b0, b1, b2, b3, b4, a, b, c, now, cost, debt)
  local prev, start, stop, nxt, after = b0, b1, b2, b3, b4
  local roll = now >= b2
  if roll then
    prev, start, stop, nxt, after = b1, b2, b3, b4, 0
  end
  if now >= b3 or (roll and a == b3) then
    local allowed, retry, unrecorded = 1, 0, 0
    if debt == 1 and cost > 0 then
      unrecorded = cost
    elseif cost > 0 then
      allowed, retry = 0, 1000
    end
    return allowed, 0, retry, 1000, b4 - b1, a, b, c, unrecorded, 0
  end
  local allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed
  if alg == 2 then -- ALG_SLIDING_WINDOW
    local curr, last = 0, 0
    if a == start then
      curr, last = b, c
    elseif a == prev then
      -- The previous period weighs with at most its quota: a debt does
      -- not roll over.
      last = b
      if last > requests then
        last = requests
      end
    elseif a == stop then -- the clock went back across the boundary
      start, stop, nxt = stop, nxt, after
      curr, last = b, c
    end
    allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed = sliding_decide(requests, a, b, c, start, stop - start, nxt - stop, false, curr, last, now, cost, debt)
  else
    local count = 0
    if a == start then
      count = b
    elseif a == stop then -- the clock went back across the boundary
      start, stop = stop, nxt
      count = b
    end
    allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed = fixed_decide(requests, start, stop, 0, count, a, b, now, cost, debt)
  end
  return allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed
end

local function decide_counter(alg, x, y, z, a, b, c, now, cost, flags, b0, b1, b2, b3, b4)
  local cap = x -- Limit.Capacity
  if alg == 1 or alg == 5 then
    cap = z
  end
  local debt = 0
  if flags % 4 >= 2 then
    debt = 1
  end
  local never = false
  if cost > cap and debt ~= 1 then
    cost, never = 0, true
  elseif cost < -cap then
    cost = -cap
  end
  local allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed
  local wait = 0
  if b0 ~= nil then
    allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed = calendar(alg, x, b0, b1, b2, b3, b4, a, b, c, now, cost, debt)
  elseif alg == 1 then -- ALG_TOKEN_BUCKET
    allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed = token_bucket(x, y, z, a, b, c, now, cost, debt)
  elseif alg == 2 then -- ALG_SLIDING_WINDOW
    allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed = sliding_window(x, y, a, b, c, now, cost, debt)
  elseif alg == 4 then -- ALG_FIXED_WINDOW
    allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed = fixed_window(x, y, a, b, now, cost, debt)
  else -- ALG_LEAKY_BUCKET; no-wait is flag bit 2
    allowed, remaining, retry, reset, ttl, a2, b2_, c2, wait, unrecorded, owed = leaky_bucket(x, y, z, a, b, c, now, cost, flags % 8 >= 4, debt)
  end
  if never then
    allowed, retry, wait = 0, -1, 0
  end
  return cap, allowed, remaining, retry, reset, ttl, a2, b2_, c2, wait, unrecorded, owed
end
