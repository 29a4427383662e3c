-- leaky_bucket.lua: the leaky bucket (a queue that shapes instead of
-- refusing), mirroring decideLeakyBucket in algorithms/leakybucket.go
-- and decide's cost above the capacity in algorithms/mode.go;
-- leaky_bucket is its ALG function (lib.lua), x, y, z its per_ms, scale
-- (its rate in lowest terms) and capacity.
--
-- The state: lib.lua's three integers, a and b the queue's end (b whole
-- ms plus a units of 1/c ms), c the unit's per_ms; no key, or c = 0, is
-- an empty queue, and a state emptied is deleted. Flag bit 2, no-wait,
-- admits only what may start now (algorithms.NoWait); a give-back (cost
-- < 0) frees nothing (the state is written back as read, its TTL set
-- anew); a cost above the capacity is decided as a look and denied with
-- retry -1 (never), unless a debt.
--
-- The key records its expiry (the codec's second form, when it fits): a
-- write that sets the TTL records Redis' clock at the call's start plus
-- the PX it sends (ttl + keep + a pad: a quarter of ttl, at least a
-- unit's time, as the token bucket's), never later than the key's real
-- expiry. A write keeps the TTL (SET ... KEEPTTL, so the value stays an
-- embedded string) when the expiry recorded covers ttl + keep and
-- exceeds it by at most the pad and 1/64 (a key then outlives its state
-- by no more than after a write that sets it).

-- LB_SHAPE, LB_SHAPE_HL: the formats the leaky bucket's states are read
-- with first, by length (lib.lua's state_fmt).
local LB_SHAPE, LB_SHAPE_HL = {}, {}

local function leaky_bucket(key, per_ms, scale, capacity, cost, flags, now, keep, undo)
  local str = rcall('GET', key)
  -- ra, c, e, rb: the state as stored (e the expiry less the time field
  -- rb, 0 for none); rh, rle, f: its header byte, e's length, the
  -- format read (lib.lua's READ_FMT); exp: the key's expiry recorded
  -- (nil for none); end_ms and end_u: the queue's end, now when it is
  -- empty.
  local ra, c, e, rb, rh, rle, f, exp
  local end_ms, end_u = now, 0
  if str == false then
    ra, c, rb, rh = 0, 0, 0, 0
  else
    local len = #str
    f = LB_SHAPE[len]
    if f then
      rh, rle, ra, c, e, rb = sunpack(f, str)
    end
    if f == nil or rh * 256 + rle ~= LB_SHAPE_HL[len] then
      f = state_fmt(str, len, LB_SHAPE, LB_SHAPE_HL)
      if f == nil then
        return nil
      end
      rh, rle, ra, c, e, rb = sunpack(f, str)
    end
    end_ms = rb + STATE_EPOCH_MS
    end_u = ra
    if e ~= 0 then
      exp = end_ms + e
    end
    if c ~= per_ms and end_u > 0 then
      -- The rate changed: round the end up to a whole ms.
      end_ms, end_u = end_ms + 1, 0
    end
    if c == 0 or end_ms < now or (end_ms == now and end_u == 0) then
      end_ms, end_u = now, 0 -- an empty queue
    end
  end
  local full = capacity * scale -- the queue's length in units
  local wait = end_ms - now -- until the first free slot, rounded up to a ms
  if end_u > 0 then
    wait = wait + 1
  end
  local debt, nowait = flags % 4 >= 2, flags % 8 >= 4 -- flag bits 1, 2
  -- The units queued after a charge of cost: exact where it is at most
  -- full (< 2^53), and a product beyond 2^53 reads beyond it.
  local q = (end_ms - now) * per_ms + end_u + cost * scale
  local remaining, ttl, w, unrecorded, owed = 0, 0, wait, 0, 0
  local unit = per_ms -- the state written: end_ms, end_u units of 1/unit ms
  if cost > 0 and q <= full and not debt and (wait == 0 or not nowait) then
    -- A charge that fits (so cost is at most the capacity): the end
    -- moves to now + q units.
    local r = q % per_ms
    ttl = (q - r) / per_ms
    end_ms = now + ttl
    end_u = r
    if r > 0 then
      ttl = ttl + 1
    end
    if not nowait then
      local x = full - q
      remaining = (x - x % scale) / scale
    end
    if flags % 2 == 1 then -- dry
      return 1, remaining, 0, ttl, ttl, w, 0, 0
    end
  else
    local never = cost > capacity and not debt
    if never then
      cost = 0 -- a look
    end
    local lead = end_ms - now
    -- Up to twice the queue's length in debt; Go's lead > 2 * full /
    -- perMs (a floor) is lead * per_ms > 2 * full here, the same for
    -- lead >= 0, and exact (2 * full < 2^53).
    local over = lead * per_ms > 2 * full
    local queued = 0
    if not over then
      queued = lead * per_ms + end_u
    end
    local allowed, retry = 1, 0
    w = 0
    if cost > 0 and debt then
      local k = 0
      if not over then
        k = quo(2 * full - queued, scale) -- >= 0 here
        if k > cost then
          k = cost
        elseif k < 0 then
          k = 0
        end
      end
      w = wait
      unrecorded = cost - k
      end_u = end_u + k * scale
      local q = quo(end_u, per_ms)
      end_ms, end_u = end_ms + q, end_u - q * per_ms
    elseif cost > 0 and nowait and wait > 0 then
      allowed, retry = 0, wait
    elseif cost > 0 and (over or queued + cost * scale > full) then
      allowed = 0
      -- floorDiv(full - end_u - cost * scale, per_ms): quo truncates.
      local x = full - end_u - cost * scale
      local q = quo(x, per_ms)
      if q * per_ms > x then
        q = q - 1
      end
      retry = lead - q
    elseif cost > 0 then
      w = wait
      end_u = end_u + cost * scale
      local r = end_u % per_ms -- end_u >= 0: quo's steps
      end_ms, end_u = end_ms + (end_u - r) / per_ms, r
    elseif cost == 0 then -- a give-back (cost < 0) frees nothing
      w = wait
    end
    lead = end_ms - now
    local empty = lead == 0 and end_u == 0
    if empty then
      remaining = capacity
    elseif not nowait and lead * per_ms <= full then
      local x = full - lead * per_ms - end_u -- quo, then at least 0
      if x > 0 then
        remaining = (x - x % scale) / scale
      end
    end
    if debt and lead > 0 and (lead - 1) * per_ms <= 2 * full then
      -- Slots taken past the queue's size.
      local q = lead * per_ms + end_u
      if q > full then
        owed = quo(q - full + scale - 1, scale)
      end
    end
    ttl = lead
    if end_u > 0 then
      ttl = lead + 1
    end
    if never then
      return 0, remaining, -1, ttl, ttl, 0, unrecorded, owed
    end
    if allowed == 0 or cost == 0 or flags % 2 == 1 then
      return allowed, remaining, retry, ttl, ttl, w, unrecorded, owed
    end
    if cost < 0 then -- the state as read, its TTL set anew
      end_ms, end_u, unit = rb + STATE_EPOCH_MS, ra, c
    end
    if empty then
      if undo then
        remember(undo, key, str, true)
      end
      rcall('DEL', key)
      return allowed, remaining, retry, ttl, ttl, w, unrecorded, owed
    end
  end
  -- The write.
  local clock = clock_ms or redis_clock()
  local m = ttl + keep
  local need = clock + m -- the expiry the state needs
  local bt = end_ms - STATE_EPOCH_MS
  local kept = exp and exp >= need and exp <= need + m / 64 -- exp is whole: m / 64 needs no floor
  if kept then
    local e2 = exp - end_ms
    if (end_u == ra or (end_u > 0 and end_u < 128 and ra > 0 and ra < 128)) and unit == c and rb >= 2147483648 and bt < 549755813888 and rle > 2 and e2 < 8388608 and e2 >= -8388608 then
      -- Each field fits where it was read, in as many bytes as it needs
      -- (the fraction as read or in its one byte, b in its 5 bytes or
      -- more, e in its 3 or more): the value takes the shape read.
      if undo then -- put back with KEEPTTL
        remember(undo, key, str, false)
      end
      rcall('SET', key, spack(f, rh, rle, end_u, c, e2, bt), 'KEEPTTL')
      return 1, remaining, 0, ttl, ttl, w, unrecorded, owed
    end
  else
    -- Kept too when exp exceeds need by at most the pad and 1/64: a
    -- quarter of ttl, at least a unit's time (scale / per_ms ms) and a ms.
    local pad = (ttl - ttl % 4) / 4
    if pad * per_ms < scale then
      pad = (scale - scale % per_ms) / per_ms + 1
    end
    m = m + pad
    kept = exp and exp >= need and exp <= clock + m + m / 64
  end
  local px, rec = nil, exp
  if not kept then
    px = px_string(m)
    rec = clock + (PX_NUM[px] or m) -- the expiry a write that sets the TTL gives, at least
  end
  local lc -- c written as read the length it was read in
  if unit == c then
    lc = rh % 8
  end
  local v, second = state_value(end_u, unit, bt, rec - end_ms, lc)
  if kept and second then
    if undo then -- put back with KEEPTTL
      remember(undo, key, str, false)
    end
    rcall('SET', key, v, 'KEEPTTL')
    return 1, remaining, 0, ttl, ttl, w, unrecorded, owed
  end
  if undo then -- a TTL shorter than the one recorded is put back as it was
    remember(undo, key, str, cost < 0 or (exp and exp > need))
  end
  if not second then -- the first form records nothing: no pad
    px = px_string(ttl + keep)
  end
  rcall('SET', key, v, 'PX', px)
  return 1, remaining, 0, ttl, ttl, w, unrecorded, owed
end

ALG[ALG_LEAKY_BUCKET] = leaky_bucket
