-- token_bucket.lua: the token bucket as a theoretical arrival time (when
-- the bucket is full again), mirroring tokenBucket and tokenLead in
-- algorithms/tokenbucket.go line by line; token_bucket is its ALG
-- function (lib.lua), x, y, z its per_ms, scale and capacity.
--
-- The state: struct TB_FMT (12 bytes), the arrival time's whole ms less
-- STATE_EPOCH_MS, its ticks (1/per_ms ms) and the key's expiry (Unix ms
-- by Redis' clock) less the arrival time; TB_WIDE (16 bytes, no expiry)
-- when they do not fit; no key is a full bucket. TB_BARE (8 bytes, no
-- expiry) is read, no longer written.
--
-- The expiry recorded is never later than the key's: a write that sets
-- the TTL records Redis' clock at the call's start plus the PX it sends
-- (ttl + keep + a pad: a quarter of ttl, at least a token's time and
-- TB_PAD_MIN, script.go's tbPadMin). A write keeps the TTL, its bytes
-- written in place (SETRANGE: the value stays a raw string), when the
-- expiry recorded covers ttl + keep and exceeds it by at most the pad,
-- so a charge moving the arrival time by a token after one that set it
-- keeps it, as does a charge within TB_PAD_MIN of the write that set it
-- on a bucket that refilled meanwhile, and a key outlives its state by
-- at most the pad and px_string's 1/64.
--
-- lead is how far the arrival time stands ahead of now, in ticks (the
-- tokens lacking, scaled). Beyond 2 × the capacity's ticks it is 2 ×
-- that + 1, which decides alike, while the waits, taken from d (whole ms
-- ahead) and the ticks, stay exact and every product below 2^53.

local TB_FMT, TB_BARE, TB_WIDE = '<i5I3i4', '<i5I3', '<i8i8'

local function token_bucket(key, per_ms, scale, capacity, cost, flags, now, keep, undo)
  local full = capacity * scale
  local str = rcall('GET', key)
  -- The time it stands at (at ms and tk ticks), the key's expiry
  -- recorded (Unix ms by Redis' clock; far in the past when none is),
  -- and d and lead, tokenLead's.
  local at, tk, exp, d, lead
  if str then
    local n = #str
    if n == 12 then
      local ms, ticks, rel = sunpack(TB_FMT, str)
      at = ms + STATE_EPOCH_MS
      tk = ticks
      exp = at + rel
    elseif n == 8 or n == 16 then
      local ms, ticks = sunpack(n == 8 and TB_BARE or TB_WIDE, str)
      at, tk, exp = ms + STATE_EPOCH_MS, ticks, -9007199254740992 -- -2^53
    else
      return nil
    end
    if tk >= per_ms then -- another rate's fraction: the next whole ms
      at, tk = at + 1, 0
    end
    d = at - now
    if d < 0 then
      at, tk, d, lead = now, 0, 0, 0
    else
      lead = d * per_ms
      if lead > 2 * full then
        lead = 2 * full + 1
      else
        lead = lead + tk
      end
    end
  else
    at, tk, exp, d, lead = now, 0, -9007199254740992, 0, 0
  end
  local allowed, retry, unrecorded, move = 1, 0, 0, 0 -- move: ticks the time moves
  local need = cost * scale
  if cost > 0 and lead + need <= full then -- a charge that fits, in a debt too
    lead = lead + need
    tk = lead % per_ms
    d = (lead - tk) / per_ms
    at = now + d
  else
    if cost > 0 then
      if flags % 4 >= 2 then -- debt
        local room = 2 * full - lead
        local k = (room - room % scale) / scale
        if k > cost then
          k = cost
        elseif k < 0 then
          k = 0
        end
        move, unrecorded = k * scale, cost - k
      elseif need > full then -- never fits
        allowed, retry = 0, -1
      else
        allowed = 0
        local x = tk + need - full + per_ms - 1
        retry = d + (x - x % per_ms) / per_ms
      end
    elseif cost < 0 then
      move = need
      if move < -full then
        move = -full
      end
      if move < -lead then
        move = -lead
      end
    end
    if move ~= 0 then
      if lead > 2 * full then -- beyond a debt's depth: the time moves
        local x = tk + move
        local r = x % per_ms
        at, tk = at + (x - r) / per_ms, r
        d = at - now
        lead = d * per_ms
        if lead > 2 * full then
          lead = 2 * full + 1
        else
          lead = lead + tk
        end
      else -- as a charge that fits
        lead = lead + move
        tk = lead % per_ms
        d = (lead - tk) / per_ms
        at = now + d
      end
    end
  end
  local remaining, owed = 0, 0
  if lead < full then
    local x = full - lead
    remaining = (x - x % scale) / scale
  elseif lead > full then
    local x = lead - full + scale - 1
    owed = (x - x % scale) / scale
    if owed > capacity then
      owed = capacity
    end
  end
  local ttl = d
  if tk > 0 then
    ttl = d + 1
  end
  if allowed == 1 and cost ~= 0 and flags % 2 == 0 then
    if lead == 0 then
      if undo then -- a delete: put back with the TTL it had
        remember(undo, key, str, true)
      end
      if str then
        rcall('DEL', key)
      end
      return allowed, remaining, retry, ttl, ttl, 0, unrecorded, owed
    end
    local need = (clock_ms or redis_clock()) + ttl + keep -- the expiry the state needs
    -- The TTL is kept when the expiry recorded passes the one needed by
    -- at most the pad, tested without computing it: over <= TB_PAD_MIN,
    -- over <= floor(ttl / 4) when 4 × over <= ttl, over <=
    -- floor(scale / per_ms) + 1 when (over - 1) × per_ms <= scale.
    local over = exp - need
    local pad -- nil while the TTL is kept
    if over < 0 or (over > TB_PAD_MIN and 4 * over > ttl and (over - 1) * per_ms > scale) then
      -- A quarter of ttl or a token's time and a ms, whichever is
      -- longer, and TB_PAD_MIN at least.
      pad = (ttl - ttl % 4) / 4
      if pad * per_ms <= scale then
        pad = (scale - scale % per_ms) / per_ms + 1
      end
      if pad < TB_PAD_MIN then
        pad = TB_PAD_MIN
      end
      exp = need + pad
    end
    local ms, rel = at - STATE_EPOCH_MS, exp - at
    if ms < -549755813888 or ms >= 549755813888 or tk >= 16777216 or rel < -2147483648 or rel >= 2147483648 then -- 2^39, 2^24, 2^31
      if undo then
        remember(undo, key, str, true)
      end
      -- A TTL kept (pad nil) is set again to the expiry recorded, over past need.
      rcall('SET', key, spack(TB_WIDE, ms, tk), 'PX', px_string(ttl + keep + (pad or over)))
      return allowed, remaining, retry, ttl, ttl, 0, unrecorded, owed
    end
    local v = spack(TB_FMT, ms, tk, rel)
    if undo then -- a TTL shorter than the one recorded is put back as it was
      remember(undo, key, str, move < 0 or (pad and over > pad))
    end
    if pad == nil then -- kept
      rcall('SETRANGE', key, '0', v)
    elseif str and #str ~= 12 then
      rcall('SET', key, v, 'PX', px_string(ttl + keep + pad))
    else -- SETRANGE makes and keeps the value a raw string, which it writes in place
      rcall('SETRANGE', key, '0', v)
      rcall('PEXPIRE', key, px_string(ttl + keep + pad))
    end
  end
  return allowed, remaining, retry, ttl, ttl, 0, unrecorded, owed
end

ALG[ALG_TOKEN_BUCKET] = token_bucket
