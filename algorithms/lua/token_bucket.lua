-- token_bucket.lua: the token bucket, mirroring decideTokenBucket and
-- tokenScale in algorithms/tokenbucket.go line by line.
--
-- Called by batch.lua, not by Redis directly; batch.lua's header gives the
-- script's KEYS, ARGV and reply.
--
-- token_bucket(requests, period_ms, burst, s, now_ms, cost) -> s2, d
--   requests, period_ms, burst  the limit (burst 0 means requests)
--   s       {a = tokens * scale, b = last refill (Unix ms), c = scale};
--           {0, 0, 0} for a key never seen
--   now_ms  Unix time in ms
--   cost    > 0 spends, 0 looks, < 0 refunds (already clamped by decide)
--   s2      the new state; s itself on a deny or when cost is 0
--   d       new_decision fields, durations in ms
--
-- Redis state: one string, pack_state(tokens * scale, last, scale).

local function token_scale(requests, period_ms)
  local g = gcd(requests, period_ms)
  return quo(requests, g), quo(period_ms, g)
end

local function token_bucket(requests, period_ms, burst, s, now, cost)
  local per_ms, scale = token_scale(requests, period_ms)
  local capacity = capacity_of(ALG_TOKEN_BUCKET, requests, burst)
  local full = capacity * scale

  local tokens, last = s.a, s.b
  if s.c == 0 then -- never seen: a full bucket
    tokens, last = full, now
  elseif s.c ~= scale then -- the limit changed: keep the whole tokens
    tokens = math.min(quo(s.a, s.c), capacity) * scale
  end
  if now > last then
    local need = full - tokens
    if need <= 0 or now - last >= ceil_div(need, per_ms) then
      tokens = full
    else
      tokens = tokens + (now - last) * per_ms
    end
    last = now
  end
  tokens = math.min(tokens, full)
  -- When the clock went back, the bucket stands at last; every wait is
  -- measured from now, so it includes the lag.
  local lag = last - now

  local d = new_decision(capacity)
  if cost > 0 and tokens < cost * scale then
    d.allowed = 0
    d.retry = lag + ceil_div(cost * scale - tokens, per_ms)
  elseif cost > 0 then
    tokens = tokens - cost * scale
  elseif cost < 0 then
    tokens = math.min(full, tokens - cost * scale)
  end
  d.remaining = quo(tokens, scale)
  d.ttl = lag + ceil_div(full - tokens, per_ms)
  if tokens < full then
    d.reset = d.ttl
  end
  if d.allowed == 0 or cost == 0 then
    return s, d
  end
  return {a = tokens, b = last, c = scale}, d
end
