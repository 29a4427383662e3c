-- counter.lua: counter_alg makes the ALG functions (lib.lua) of the
-- algorithms whose state is three integers (sliding window, leaky
-- bucket), mirroring decideMode in algorithms/mode.go and, for a
-- calendar limit, decideCalendar in algorithms/calendar.go. Each
-- algorithm's decide returns
--
--   allowed, remaining, retry, reset, ttl, a2, b2, c2, [wait,] unrecorded, owed
--
-- (wait for the leaky bucket only). A cost above the capacity is decided
-- as a look and denied with retry -1 (never), unless a debt; a refund
-- beyond it is clamped.

-- calendar is the sliding window's part of decideCalendar on the
-- boundaries b0 < .. < b4 floodgate computed ([b1, b2) held its now).
-- The period is [b1, b2) for a now before b2 (decided at b1 if before
-- it), else [b2, b3); a now at or past b3, or a state starting at b3
-- while deciding [b2, b3), is out of range: a charge is denied with
-- retry 1000 ms, nothing changed (a debt: allowed, all unrecorded). A
-- state start that is no boundary of the period counts as empty. A debt
-- is not carried past the period's end.
local function calendar(requests, b0, b1, b2, b3, b4, a, b, c, now, cost, debt)
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
  return sliding_decide(requests, a, b, c, start, stop - start, nxt - stop, false, curr, last, now, cost, debt)
end

-- counter_alg is the ALG function of a three-integer state: GET,
-- decode_counter, the decision, write_counter unless dry or denied.
local function counter_alg(leaky)
  return function(key, x, y, z, cost, flags, now, keep, undo, b0, b1, b2, b3, b4)
    local str = rcall('GET', key)
    local a, b, c, _, rh = decode_counter(str, leaky)
    if a == nil then
      return nil
    end
    local cap, debt, never, charge = x, 0, false, cost -- Limit.Capacity
    if leaky then
      cap = z
    end
    if flags % 4 >= 2 then
      debt = 1
    end
    if cost > cap and debt ~= 1 then
      charge, never = 0, true
    elseif cost < -cap then
      charge = -cap
    end
    local allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed
    local wait = 0
    if b0 ~= nil then
      allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed = calendar(x, b0, b1, b2, b3, b4, a, b, c, now, charge, debt)
    elseif leaky then -- no-wait is flag bit 2
      allowed, remaining, retry, reset, ttl, a2, b2_, c2, wait, unrecorded, owed = leaky_bucket(x, y, z, a, b, c, now, charge, flags % 8 >= 4, debt)
    else
      allowed, remaining, retry, reset, ttl, a2, b2_, c2, unrecorded, owed = sliding_window(x, y, a, b, c, now, charge, debt)
    end
    if never then
      return 0, remaining, -1, reset, ttl, 0, unrecorded, owed
    end
    if allowed == 1 and charge ~= 0 and flags % 2 == 0 then
      if undo then
        remember(undo, key, str, charge < 0 or ttl <= 0)
      end
      write_counter(key, leaky, a2, b2_, c2, ttl, keep, c, rh)
    end
    return allowed, remaining, retry, reset, ttl, wait, unrecorded, owed
  end
end

ALG[ALG_SLIDING_WINDOW] = counter_alg(false)
ALG[ALG_LEAKY_BUCKET] = counter_alg(true)
