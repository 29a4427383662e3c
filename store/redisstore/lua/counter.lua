-- counter.lua: counter_alg makes the sliding window's ALG function
-- (lib.lua) from its decision (sliding_window.lua), mirroring decideMode
-- in algorithms/mode.go. The decision takes
--
--   x, y, z, a, b, c, now, cost, flags, debt, b0, b1, b2, b3, b4
--
-- (the request's x, y, z and flags, the state read, the cost clamped,
-- debt 1 or 0, a calendar limit's boundaries or nil) and returns
--
--   allowed, remaining, retry, reset, ttl, a2, b2, c2, wait, unrecorded, owed
--
-- A cost above the capacity is decided as a look and denied with retry
-- -1 (never), unless a debt; a refund beyond it is clamped.

-- counter_alg is the ALG function of a three-integer state: GET, the
-- state decoded (lib.lua's codec), the decision, and unless dry or denied
-- the write.
--
-- The key records its expiry (the codec's second form, when it fits): a
-- write that sets the TTL records Redis' clock at the call's start plus
-- the PX it sends (ttl + keep: the state's end holds for a window),
-- never later than the key's real expiry. A write keeps the TTL (SET ...
-- KEEPTTL) when the expiry recorded covers ttl + keep and exceeds it by
-- at most 1/64 (a key then outlives its state by no more than after a
-- write that sets it). Every write is a SET, so the value stays an
-- embedded string, in the allocation of Redis' object header (SETRANGE
-- would make it a raw string, a second allocation).
local function counter_alg(decide)
  return function(key, x, y, z, cost, flags, now, keep, undo, b0, b1, b2, b3, b4)
    local str = rcall('GET', key)
    -- rh, rle, rk: the header byte read, its e's length, its READ_FMT
    -- key; ra, e: a and e as stored; exp: the key's expiry recorded (nil
    -- for none)
    local a, b, c, rh, rle, rk, ra, e, exp
    if str == false then
      a, b, c, rh = 0, 0, 0, 0
    else
      local len = #str
      rh, rle = sbyte(str, 1, 2)
      if rh == nil or len > 31 then
        return nil
      elseif rh < 64 then
        rle = 0
      elseif rh >= 128 or rle == nil or rle > 7 then
        return nil
      end
      rk = (rh * 8 + rle) * 32 + len
      local f = READ_FMT[rk] or read_fmt(rh, rle, len)
      if f == nil then
        return nil
      end
      ra, c, e, b = sunpack(f, str)
      a = ra + STATE_EPOCH_MS
      if e ~= 0 then
        exp = a + e
      end
    end
    local debt, never, charge = 0, false, cost
    if flags % 4 >= 2 then
      debt = 1
    end
    if cost > 1 or cost < -1 then -- a capacity (Limit.Capacity, x) is 1 at least
      if cost > x and debt ~= 1 then
        charge, never = 0, true
      elseif cost < -x then
        charge = -x
      end
    end
    local allowed, remaining, retry, reset, ttl, a2, b2_, c2, wait, unrecorded, owed = decide(x, y, z, a, b, c, now, charge, flags, debt, b0, b1, b2, b3, b4)
    if never then
      return 0, remaining, -1, reset, ttl, 0, unrecorded, owed
    end
    if allowed == 0 or charge == 0 or flags % 2 == 1 then
      return allowed, remaining, retry, reset, ttl, wait, unrecorded, owed
    end
    if ttl <= 0 then
      if undo then
        remember(undo, key, str, true)
      end
      rcall('DEL', key)
      return allowed, remaining, retry, reset, ttl, wait, unrecorded, owed
    end
    -- kept: exp covers need and exceeds it by at most 1/64 of ttl + keep
    -- (exp is whole: m / 64 needs no floor).
    local clock = clock_ms or redis_clock()
    local need, m = clock + ttl + keep, ttl + keep
    local kept = exp and exp >= need and exp <= need + m / 64
    if kept and a2 == a and c2 == c and b > 0 and b < 128 and b2_ > 0 and b2_ < 128 then
      -- A charge in the window read: only its count moves, within its
      -- byte; the value takes the shape read.
      if undo then -- put back with KEEPTTL
        remember(undo, key, str, false)
      end
      rcall('SET', key, spack(SAME_FMT[rk], rh, rle, ra, c2, e, b2_), 'KEEPTTL')
      return allowed, remaining, retry, reset, ttl, wait, unrecorded, owed
    end
    local px, rec = nil, exp
    if not kept then
      px = px_string(m)
      rec = clock + (PX_NUM[px] or m) -- the expiry a write that sets the TTL gives, at least
    end
    local lc -- a c written as read the length it was read in
    if c2 == c then
      lc = rh % 8
    end
    local v, second = state_value(a2 - STATE_EPOCH_MS, c2, b2_, rec - a2, lc)
    if kept and second then
      if undo then -- put back with KEEPTTL
        remember(undo, key, str, false)
      end
      rcall('SET', key, v, 'KEEPTTL')
      return allowed, remaining, retry, reset, ttl, wait, unrecorded, owed
    end
    if undo then -- a TTL shorter than the one recorded is put back as it was
      remember(undo, key, str, charge < 0 or (exp and exp > need))
    end
    if not second then
      px = px_string(ttl + keep)
    end
    rcall('SET', key, v, 'PX', px)
    return allowed, remaining, retry, reset, ttl, wait, unrecorded, owed
  end
end

ALG[ALG_SLIDING_WINDOW] = counter_alg(sliding_window)
