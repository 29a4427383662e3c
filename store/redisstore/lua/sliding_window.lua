-- sliding_window.lua: the sliding-window counter, mirroring
-- slidingWindow, slidingCounts, slidingDecide, slidingWait and
-- slidingCarryWait in algorithms/slidingwindow.go line by line, for a
-- calendar limit the sliding window's part of decideCalendar in
-- algorithms/calendar.go, and decide's cost beyond the capacity in
-- algorithms/mode.go; sliding_window is its ALG function (lib.lua),
-- x, y, z its requests, period_ms (a calendar period's length) and
-- burst (unused).
--
-- The state: lib.lua's three integers, a the window's start, b its
-- count, c the previous window's count; no key is 0, 0, 0, and a state
-- whose TTL is 0 is deleted. A cost above the capacity (requests) is
-- decided as a look and denied with retry -1 (never), unless a debt; a
-- refund beyond it is clamped.
--
-- A fixed period: the window holding now and its counts come from the
-- state (slidingWindow, slidingCounts), and a debt carries into later
-- windows. A calendar period (boundaries b0 < .. < b4, b0 nil for a
-- fixed period) is [b1, b2) for a now before b2 (decided at b1 if
-- before it), else [b2, b3); a now at or past b3, or a state starting at
-- b3 while deciding [b2, b3), is out of range: a charge is denied with
-- retry 1000 ms, nothing changed (a debt: allowed, all unrecorded). A
-- state start that is no boundary of the period counts as empty, and a
-- debt is not carried past the period's end. Then the decision in the
-- window (slidingDecide): the estimate is curr + prev * (w - e) / w, e ms
-- into the window of w ms followed by one of w2; sums are kept
-- multiplied by w.
--
-- The key records its expiry (the codec's second form, when it fits): a
-- write that sets the TTL records Redis' clock at the call's start plus
-- the PX it sends (ttl + keep: the state's end holds for a window, no
-- pad), never later than the key's real expiry. A write keeps the TTL
-- (SET ... KEEPTTL) when the expiry recorded covers ttl + keep and
-- exceeds it by at most 1/64 (a key then outlives its state by no more
-- than after a write that sets it). Every write is a SET, so the value
-- stays an embedded string, in the allocation of Redis' object header
-- (SETRANGE would make it a raw string, a second allocation).

-- SW_SHAPE, SW_SHAPE_HL: the formats the sliding window's states are
-- read with first, by length (lib.lua's state_fmt).
local SW_SHAPE, SW_SHAPE_HL = {}, {}

local function sliding_window(key, requests, period_ms, _, cost, flags, now, keep, undo, b0, b1, b2, b3, b4)
  local str = rcall('GET', key)
  -- rh, rle, f: the header byte read, its e's length, the format read
  -- (lib.lua's READ_FMT); ra, e: a and e as stored; exp: the key's
  -- expiry recorded (nil for none)
  local a, b, c, rh, rle, f, ra, e, exp
  if str == false then
    a, b, c, rh = 0, 0, 0, 0
  else
    local len = #str
    f = SW_SHAPE[len]
    if f then
      rh, rle, ra, c, e, b = sunpack(f, str)
    end
    if f == nil or rh * 256 + rle ~= SW_SHAPE_HL[len] then
      f = state_fmt(str, len, SW_SHAPE, SW_SHAPE_HL)
      if f == nil then
        return nil
      end
      rh, rle, ra, c, e, b = sunpack(f, str)
    end
    a = ra + STATE_EPOCH_MS
    if e ~= 0 then
      exp = a + e
    end
  end
  local debt, never = flags % 4 >= 2, false -- flag bit 1
  if cost > 1 or cost < -1 then -- a capacity (Limit.Capacity, requests) is 1 at least
    if cost > requests and not debt then
      cost, never = 0, true -- a look
    elseif cost < -requests then
      cost = -requests
    end
  end
  local w, w2, carry, curr, prev, start, out = period_ms, period_ms, true, 0, 0 -- start: set below; out: false until out of range
  if b0 == nil then -- a fixed period: the window holding now
    local r = now % w -- the window's start, quo's steps
    if r < 0 then
      r = r + w
    end
    start = now - r
    if a % w ~= 0 then
      -- a window of another period: the limit changed
    elseif a == start then
      curr = b
      prev = c
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
      out = true
    elseif a == start then
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
  local allowed, remaining, retry, reset, ttl, unrecorded, owed = 1, 0, 0, 0, 0, 0, 0
  if out then -- nothing changed
    reset, ttl = 1000, b4 - b1
    if debt and cost > 0 then
      unrecorded = cost
    elseif cost > 0 then
      allowed, retry = 0, 1000
    end
    start, curr, prev = a, b, c
  else
    local at = now -- the moment decided, >= now
    if start > now then
      at = start
    end
    local e = at - start -- elapsed in the current window
    local limit = requests * w
    local weighted = curr * w + prev * (w - e)

    if debt and cost > 0 then
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
    -- remaining: max(0, quo(limit - weighted, w)), quo's steps
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
    ttl = reset
    if ttl == 0 and at > now then
      -- The clock went back: an empty window ahead of now still decides
      -- differently from no state until the clock reaches it.
      ttl = at - now
    end
    -- owed: min(ceil((weighted - limit) / w), requests)
    if weighted > limit then
      owed = quo(weighted - limit + w - 1, w)
      if owed > requests then
        owed = requests
      end
    end
  end
  if never then
    return 0, remaining, -1, reset, ttl, 0, unrecorded, owed
  end
  if allowed == 0 or cost == 0 or flags % 2 == 1 then -- denied, a look, or dry
    return allowed, remaining, retry, reset, ttl, 0, unrecorded, owed
  end
  if ttl <= 0 then
    if undo then
      remember(undo, key, str, true)
    end
    rcall('DEL', key)
    return allowed, remaining, retry, reset, ttl, 0, unrecorded, owed
  end
  -- The write of start, curr and prev. kept: exp covers need and
  -- exceeds it by at most 1/64 of ttl + keep (exp is whole: m / 64
  -- needs no floor).
  local clock = clock_ms or redis_clock()
  local need, m = clock + ttl + keep, ttl + keep
  local kept = exp and exp >= need and exp <= need + m / 64
  if kept and start == a and prev == c and b > 0 and b < 128 and curr > 0 and curr < 128 then
    -- A charge in the window read: only its count moves, within its
    -- byte; the value takes the shape read.
    if undo then -- put back with KEEPTTL
      remember(undo, key, str, false)
    end
    rcall('SET', key, spack(f, rh, rle, ra, prev, e, curr), 'KEEPTTL')
    return allowed, remaining, retry, reset, ttl, 0, unrecorded, owed
  end
  local px, rec = nil, exp
  if not kept then
    px = px_string(m)
    rec = clock + (PX_NUM[px] or m) -- the expiry a write that sets the TTL gives, at least
  end
  local lc -- a c written as read the length it was read in
  if prev == c then
    lc = rh % 8
  end
  local v, second = state_value(start - STATE_EPOCH_MS, prev, curr, rec - start, lc)
  if kept and second then
    if undo then -- put back with KEEPTTL
      remember(undo, key, str, false)
    end
    rcall('SET', key, v, 'KEEPTTL')
    return allowed, remaining, retry, reset, ttl, 0, unrecorded, owed
  end
  if undo then -- a TTL shorter than the one recorded is put back as it was
    remember(undo, key, str, cost < 0 or (exp and exp > need))
  end
  if not second then
    px = px_string(ttl + keep)
  end
  rcall('SET', key, v, 'PX', px)
  return allowed, remaining, retry, reset, ttl, 0, unrecorded, owed
end

ALG[ALG_SLIDING_WINDOW] = sliding_window
