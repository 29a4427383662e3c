-- lib.lua: helpers shared by the algorithm twins and batch.lua.
--
-- Lua 5.1 numbers are doubles. Every value the algorithms compute is an
-- integer below 2^53 (algorithms.MaxScaled and the validation in limit.go
-- keep it there), and doubles hold such integers exactly; only division
-- rounds, so quo corrects the rounded quotient to Go's exact integer result.
-- Numbers handed to redis.call are formatted with itoa, never left to
-- Lua's "%.14g" tostring, which would round them.

local ALG_TOKEN_BUCKET, ALG_SLIDING_WINDOW, ALG_SLIDING_WINDOW_LOG, ALG_FIXED_WINDOW = 1, 2, 3, 4

-- quo is Go's a / b on int64: the quotient truncated toward zero. b > 0.
local function quo(a, b)
  if a < 0 then
    return -quo(-a, b)
  end
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- ceil_div is Go's ceilDiv: (a + b - 1) / b.
local function ceil_div(a, b)
  return quo(a + b - 1, b)
end

-- gcd is Go's gcd, with % written out as a - quo(a, b) * b.
local function gcd(a, b)
  while b ~= 0 do
    a, b = b, a - quo(a, b) * b
  end
  return a
end

-- itoa formats an integer exactly, for redis.call arguments.
local function itoa(v)
  return string.format('%d', v)
end

-- new_decision is Go's Decision{Allowed: true, Limit: limit}, durations in
-- ms: retry (RetryAfter; -1 is Never), reset (ResetAfter), ttl (TTL).
local function new_decision(limit)
  return {allowed = 1, limit = limit, remaining = 0, retry = 0, reset = 0, ttl = 0}
end

-- State codec for the one-string states (token bucket, sliding window,
-- fixed window): three signed integers a, b, c (Go's State.A, B, C) packed
-- as
--
--   byte 1     len(a) * 8 + len(c), each length 0..7 bytes
--   a          len(a) bytes, little-endian two's complement (absent if 0)
--   c          len(c) bytes
--   b          the remaining 0..8 bytes
--
-- using the fewest bytes each value needs. The time field (b, the last
-- refill, for a token bucket; a, the window start, for the windows) is
-- stored minus STATE_EPOCH_MS, so it takes 5 bytes until about 2043
-- instead of 6: a token bucket of 100 per hour then packs into 12 bytes,
-- and Redis 7.0 keeps a value of up to 12 bytes in the same allocation as
-- its object header, so its key costs 88 bytes of MEMORY USAGE (104 at 13
-- bytes).
local STATE_EPOCH_MS = 1767225600000 -- 2026-01-01T00:00:00Z

-- int_len is the number of bytes v needs in two's complement (0 for 0).
local function int_len(v)
  if v == 0 then
    return 0
  end
  local n, bound = 1, 128
  while v >= bound or v < -bound do
    n, bound = n + 1, bound * 256
  end
  return n
end

local function pack_int(v, n)
  if n == 0 then
    return ''
  end
  return struct.pack('<i' .. n, v)
end

local function pack_state(a, b, c)
  local la, lb, lc = int_len(a), int_len(b), int_len(c)
  if la > 7 or lc > 7 or lb > 8 then
    error('floodgate: state value out of range')
  end
  return string.char(la * 8 + lc) .. pack_int(a, la) .. pack_int(c, lc) .. pack_int(b, lb)
end

local function unpack_int(str, pos, n)
  if n == 0 then
    return 0, pos
  end
  return struct.unpack('<i' .. n, str, pos)
end

-- unpack_state reads pack_state's string into {a, b, c}; nil if malformed.
local function unpack_state(str)
  local len = string.len(str)
  if len < 1 then
    return nil
  end
  local h = string.byte(str, 1)
  local la, lc = math.floor(h / 8), h % 8
  local lb = len - 1 - la - lc
  if la > 7 or lb < 0 or lb > 8 then
    return nil
  end
  local a, c, b, pos
  a, pos = unpack_int(str, 2, la)
  c, pos = unpack_int(str, pos, lc)
  b, pos = unpack_int(str, pos, lb)
  return {a = a, b = b, c = c}
end

-- capacity is Go's Limit.Capacity.
local function capacity_of(alg, requests, burst)
  if alg == ALG_TOKEN_BUCKET and burst > 0 then
    return burst
  end
  return requests
end
