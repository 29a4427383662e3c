-- token_bucket.lua: the token bucket, mirroring tokenBucket, refill and
-- tokenScale in algorithms/tokenbucket.go: token_bucket_charge takes
-- their steps up to the new state and its ttl, token_bucket adds what
-- the decision reports.
--
-- token_bucket_charge(per_ms, scale, capacity, a, b, c, now_ms, cost, debt)
--     -> allowed, ttl, tokens, last, unrecorded
-- token_bucket(per_ms, scale, capacity, a, b, c, now_ms, cost, debt)
--     -> allowed, remaining, retry, reset, ttl, a2, b2, c2, unrecorded, owed
--   per_ms, scale, capacity  the limit: tokenScale's rate in lowest terms
--           (algorithms.Limit.Scale, computed by the store) and Capacity
--   a, b, c  the state: tokens * scale, last refill (Unix ms), scale;
--           0, 0, 0 for a key never seen
--   now_ms  Unix time in ms
--   cost    > 0 spends, 0 looks, < 0 refunds (a refund beyond the
--           capacity is clamped; a cost above it is denied unless a debt)
--   debt    1 charges a positive cost even when it does not fit, down to
--           -capacity tokens (algorithms.Debt); nil or 0 otherwise
--   tokens, last  the bucket after the decision (tokens * scale): the new
--           state's a and b, its c being scale; on a deny the refilled
--           bucket, which is not written
--   unrecorded, owed  Decision.Unrecorded, and the debt (DebtOf) after
--   allowed 1 or 0; remaining, retry, reset, ttl: Go's Decision, in ms
--   a2, b2, c2  the new state: a, b, c themselves on a deny or when cost
--           is 0
--
-- Multiple results rather than tables, and gcd, ceil_div and math.min
-- written out:
-- every table, closure and upvalue is an allocation per script call,
-- which cost more than the decision's arithmetic.

local function token_bucket_charge(per_ms, scale, capacity, a, b, c, now, cost, debt)
  -- Every quo of a numerator that cannot be negative is written out
  -- (lib.lua's quo: remainder, fixed when negative, exact division).
  local full = capacity * scale

  local tokens, last = a, b
  if c == 0 then -- never seen: a full bucket
    tokens, last = full, now
  elseif c ~= scale then -- the limit changed: keep the whole tokens (and debt)
    tokens = quo(a, c)
    if tokens > capacity then
      tokens = capacity
    elseif tokens < -capacity then
      tokens = -capacity
    end
    tokens = tokens * scale
  end
  if now > last then
    -- Full once the ms since last reach ceil(need / per_ms), that is once
    -- their refill reaches need: exact in doubles, since rounding keeps
    -- the order of a product and an integer below 2^53.
    if (now - last) * per_ms >= full - tokens then
      tokens = full
    else
      tokens = tokens + (now - last) * per_ms
    end
    last = now
  end
  if tokens > full then
    tokens = full
  end

  local allowed, unrecorded = 1, 0
  if debt == 1 and cost > 0 then
    -- Whole units down to -capacity tokens (tokens >= -full holds).
    local k = quo(tokens + full, scale)
    if k > cost then
      k = cost
    end
    tokens = tokens - k * scale
    unrecorded = cost - k
  elseif cost > 0 and tokens < cost * scale then -- so also a cost above the capacity
    allowed = 0
  elseif cost ~= 0 then
    if cost < -capacity then
      cost = -capacity
    end
    tokens = tokens - cost * scale
    if tokens > full then
      tokens = full
    end
  end
  -- When the clock went back, the bucket stands at last; every wait is
  -- measured from now, so it includes the lag (last - now).
  local x = full - tokens + per_ms - 1 -- >= 0: tokens <= full
  local r = x % per_ms
  if r < 0 then
    r = r + per_ms
  end
  return allowed, last - now + (x - r) / per_ms, tokens, last, unrecorded
end

local function token_bucket(per_ms, scale, capacity, a, b, c, now, cost, debt)
  local allowed, ttl, tokens, last, unrecorded = token_bucket_charge(per_ms, scale, capacity, a, b, c, now, cost, debt)
  local retry, reset = 0, 0
  if allowed == 0 then
    retry = last - now + quo(cost * scale - tokens + per_ms - 1, per_ms)
  end
  if tokens < capacity * scale then
    reset = ttl
  end
  local remaining, owed = 0, 0 -- max(0, quo(tokens, scale)); ceil(-tokens / scale)
  if tokens > 0 then
    remaining = quo(tokens, scale)
  elseif tokens < 0 then
    owed = quo(-tokens + scale - 1, scale)
  end
  if allowed == 0 or cost == 0 then
    return allowed, remaining, retry, reset, ttl, a, b, c, unrecorded, owed
  end
  return allowed, remaining, retry, reset, ttl, tokens, last, scale, unrecorded, owed
end
