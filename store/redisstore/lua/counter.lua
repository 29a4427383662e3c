-- counter.lua: counter_alg makes the ALG functions (lib.lua) of the
-- algorithms whose state is three integers (sliding window, leaky
-- bucket), mirroring decideMode in algorithms/mode.go. Each algorithm's
-- decide takes
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
-- the PX it sends (ttl + keep + a pad: none for a sliding window, whose
-- state's end holds for a window; for a leaky bucket a quarter of ttl, at
-- least a unit's time, as the token bucket's), never later than the key's
-- real expiry. A write keeps the TTL (SET ... KEEPTTL) when the expiry
-- recorded covers ttl + keep and exceeds ttl + keep + pad by at most 1/64
-- (a key then outlives its state by no more than after a write that sets
-- it). Every write is a SET, so the value stays an embedded string, in
-- the allocation of Redis' object header (SETRANGE would make it a raw
-- string, a second allocation).
local function counter_alg(leaky, decide)
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
      if leaky then
        a, b = ra, b + STATE_EPOCH_MS
        if e ~= 0 then
          exp = b + e
        end
      else
        a = ra + STATE_EPOCH_MS
        if e ~= 0 then
          exp = a + e
        end
      end
    end
    local debt, never, charge = 0, false, cost
    if flags % 4 >= 2 then
      debt = 1
    end
    if cost > 1 or cost < -1 then -- a capacity (Limit.Capacity) is 1 at least
      local cap = x
      if leaky then
        cap = z
      end
      if cost > cap and debt ~= 1 then
        charge, never = 0, true
      elseif cost < -cap then
        charge = -cap
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
    -- kept: exp covers need and exceeds it by at most the pad and 1/64
    -- of ttl + keep + pad (exp is whole: m / 64 needs no floor); within
    -- 1/64 of ttl + keep it is kept whatever the pad.
    local clock = clock_ms or redis_clock()
    local need, m = clock + ttl + keep, ttl + keep
    local kept = exp and exp >= need and exp <= need + m / 64
    if leaky and not kept then -- x per_ms, y scale: a unit takes y / x ms
      local pad = (ttl - ttl % 4) / 4
      if pad * x < y then
        pad = (y - y % x) / x + 1
      end
      m = m + pad
      kept = exp and exp >= need and exp <= clock + m + m / 64
    end
    if kept and not leaky and a2 == a and c2 == c and b > 0 and b < 128 and b2_ > 0 and b2_ < 128 then
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
    -- The value (lib.lua's codec) recording rec: the time field takes 5
    -- bytes from 2026-01-26 to 2043, a count or a fraction mostly 0 or 1
    -- byte, and a c written as read the length it was read in.
    local la, lb, lc
    if leaky then
      e, b2_ = rec - b2_, b2_ - STATE_EPOCH_MS
      if a2 == 0 then
        la = 0
      else
        la = int_len(a2)
      end
      if b2_ >= 2147483648 and b2_ < 549755813888 then -- 2^31, 2^39
        lb = 5
      else
        lb = int_len(b2_)
      end
    else
      e, a2 = rec - a2, a2 - STATE_EPOCH_MS
      if a2 >= 2147483648 and a2 < 549755813888 then
        la = 5
      else
        la = int_len(a2)
      end
      if b2_ > 0 and b2_ < 128 then
        lb = 1
      else
        lb = int_len(b2_)
      end
    end
    if c2 == c then
      lc = rh % 8
    else
      lc = int_len(c2)
    end
    local h, n, le = la * 8 + lc, la + lc + lb, 0
    if e >= 8388608 or e < -8388608 then -- 2^23
      if n < 7 and e >= -2147483648 and e < 2147483648 then -- 2^31: 12 bytes at most
        h, le = h + 64, 4
      end
    elseif n < 8 and e ~= 0 then
      h, le = h + 64, 3
    end
    local v = spack(PACK_FMT[(h * 8 + le) * 9 + lb] or pack_fmt(h, le, lb), h, le, a2, c2, e, b2_)
    if kept and le > 0 then
      if undo then -- put back with KEEPTTL
        remember(undo, key, str, false)
      end
      rcall('SET', key, v, 'KEEPTTL')
      return allowed, remaining, retry, reset, ttl, wait, unrecorded, owed
    end
    if undo then -- a TTL shorter than the one recorded is put back as it was
      remember(undo, key, str, charge < 0 or (exp and exp > need))
    end
    if le == 0 then -- the first form records nothing: no pad
      px = px_string(ttl + keep)
    end
    rcall('SET', key, v, 'PX', px)
    return allowed, remaining, retry, reset, ttl, wait, unrecorded, owed
  end
end

ALG[ALG_SLIDING_WINDOW] = counter_alg(false, sliding_window)
ALG[ALG_LEAKY_BUCKET] = counter_alg(true, leaky_bucket)
