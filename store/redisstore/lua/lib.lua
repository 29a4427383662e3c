-- lib.lua: what every floodgate script shares: the integer helpers, the
-- decoding of ARGV and the state codec. The scripts Redis runs are this
-- file, the algorithm twins and a driver (lean.lua or batch.lua), joined
-- (see store/redisstore/script.go).
--
-- Lua 5.1 numbers are doubles. Every value the algorithms compute is an
-- integer below 2^53 (algorithms.MaxScaled and the validation in
-- algorithms/limit.go keep it there), and doubles hold such integers
-- exactly; only division rounds, so quo takes the remainder first and
-- divides exactly.
--
-- The same files also make a Redis 7 function library (script.go's
-- librarySource), whose body Redis runs once, at FUNCTION LOAD, with
-- only `redis` visible: so no statement outside a function here (or in
-- the twins) may read another global (math, string, struct), and no
-- function reads KEYS or ARGV as globals (a function gets them as
-- arguments; the drivers pass them on).
--
-- Everything here runs on every script call, so it is lean: no tables,
-- no string formatting per request, locals only (a `local function` costs
-- a closure per call; a table costs far more), and in the hot paths the
-- VM's operators rather than calls: a Lua function call costs about 300
-- instructions of Redis, a C function (math.floor, string.len) 250 and
-- an operator (%, #) 10-20 (callgrind, bench/RESULTS.md, issue 11, round
-- 3).

local ALG_TOKEN_BUCKET, ALG_SLIDING_WINDOW, ALG_SLIDING_WINDOW_LOG, ALG_FIXED_WINDOW, ALG_LEAKY_BUCKET = 1, 2, 3, 4, 5

-- quo is Go's a / b on int64: the quotient truncated toward zero. b > 0.
--
-- For 0 <= a, a + b <= 2^53: Lua's a % b is a - floor(a / b) * b, and
-- the rounded a / b floors to the true quotient q or to q + 1 (never
-- below q, which is a double), so a % b is the true remainder r or r - b,
-- computed exactly (every product and difference is an integer of at
-- most a + b); adding b back when it is negative gives r, and (a - r) / b
-- divides a multiple of b exactly. The token bucket writes the same three
-- lines out where its numerator cannot be negative.
local function quo(a, b)
  if a < 0 then
    return -quo(-a, b)
  end
  local r = a % b
  if r < 0 then
    r = r + b
  end
  return (a - r) / b
end

-- ARGV. ARGV[1] starts with the call's header, HDR_LEN bytes:
--
--   byte 1      the form of every integer of the call: 'b' binary, 's' seven
--   then now_ms (Unix ms; negative means Redis' TIME), keep_ms (added to
--   every TTL written, >= 0) and write (1 writes, 0 probes: decides,
--   never writes), as the form says.
--
-- Then come the requests, REQ_LEN bytes each:
--
--   byte 1      8 * flags + algorithm (1 token_bucket, 2 sliding_window,
--               3 sliding_window_log, 4 fixed_window, 5 leaky_bucket);
--               flags bit 0 (1): dry run (decide as if charging, never
--               write); bit 1 (2): debt (algorithms.Debt: a positive
--               cost is charged even when it does not fit, bounded; see
--               counter.lua); bit 2 (4): no-wait (a leaky bucket admits
--               only what may start now: algorithms.NoWait); bit 3 (8): a
--               calendar limit, CAL_LEN more bytes follow the request.
--               The drivers reject any other bit.
--   then requests per period (> 0), period_ms (> 0; a calendar limit's
--   is its current period's length, and unused), burst (token bucket
--   capacity, 0 means requests; >= 0) and cost (> 0 spends, 0 looks, < 0
--   refunds).
--
-- A calendar request (sliding_window or fixed_window only) is followed by
-- five integers, the period boundaries b0 < b1 < b2 < b3 < b4 in Unix ms
-- that floodgate computed from its own clock in the limit's time zone
-- (algorithms.Bounds; counter.lua's decide_calendar picks the period of
-- the script's now among them). Requests are so of two lengths, REQ_LEN
-- and REQ_LEN + CAL_LEN; check_groups walks them by their first byte.
--
-- Binary ('b', what the store sends): struct '<i8i8B' for the header's
-- fields and '<Bi8i8i8i8' for a request, one struct.unpack a request.
-- Seven ('s', for tools that cut arguments at a NUL byte, such as
-- redis-benchmark): every byte has its top bit set (0x80 + the value for
-- the single bytes) and an integer is 8 bytes of 7 bits, low first, the
-- last holding the sign in bit 6 and the top 6 of 55 magnitude bits; read
-- with string.byte and arithmetic, so more slowly than the binary form.
local HDR_LEN, REQ_LEN, CAL_LEN = 18, 33, 40

-- req_len is the length of the request whose first byte is h in the form
-- whose single bytes are offset by off (0 binary, 128 seven-bit).
local function req_len(h, off)
  if (h - off) % 128 >= 64 then -- flag bit 3: a calendar request
    return REQ_LEN + CAL_LEN
  end
  return REQ_LEN
end

-- check_groups is nil when argv (the call's ARGV) holds the header and
-- whole requests in every group (req_len each; off as req_len's), n
-- requests in all; else the error reply.
local function check_groups(argv, n, off)
  local total = 0
  for g = 1, #argv do
    local str = argv[g]
    local pos, len = 1, #str
    if g == 1 then
      pos = HDR_LEN + 1
    end
    if pos > len then
      return redis.error_reply('ERR floodgate: want ' .. REQ_LEN .. ' bytes per request (' .. (REQ_LEN + CAL_LEN) .. ' for a calendar one) in every group')
    end
    while pos <= len do
      pos = pos + req_len(string.byte(str, pos), off)
      total = total + 1
    end
    if pos ~= len + 1 then
      return redis.error_reply('ERR floodgate: want ' .. REQ_LEN .. ' bytes per request (' .. (REQ_LEN + CAL_LEN) .. ' for a calendar one) in every group')
    end
  end
  if total ~= n then
    return redis.error_reply('ERR floodgate: ' .. total .. ' requests for ' .. n .. ' keys')
  end
  return nil
end

-- read_request decodes the binary request at byte pos of str: algorithm,
-- flags, requests, period_ms, burst, cost. str holds REQ_LEN bytes from
-- pos (the drivers check the lengths first).
local function read_request(str, pos)
  local h, r, p, b, c = struct.unpack('<Bi8i8i8i8', str, pos)
  return h % 8, (h - h % 8) / 8, r, p, b, c
end

-- read_request7 decodes the seven-bit request at byte pos of str, as
-- read_request; nil if a byte is out of range. Each integer is
-- (top byte % 64) * 128^7 + ... + (lowest byte - 128), negated if bit 6
-- of its top byte is set; every byte's 128 comes off before it is added,
-- so no partial sum passes 2^53. Written out rather than called per
-- integer: a function call costs more than the arithmetic.
local function read_request7(str, pos)
  local h, r1, r2, r3, r4, r5, r6, r7, r8, p1, p2, p3, p4, p5, p6, p7, p8,
    b1, b2, b3, b4, b5, b6, b7, b8, c1, c2, c3, c4, c5, c6, c7, c8 = string.byte(str, pos, pos + 32)
  if c8 == nil or h < 128 then
    return nil
  end
  local r = ((((((r8 % 64 * 128 + (r7 - 128)) * 128 + (r6 - 128)) * 128 + (r5 - 128)) * 128 + (r4 - 128)) * 128 + (r3 - 128)) * 128 + (r2 - 128)) * 128 + (r1 - 128)
  local p = ((((((p8 % 64 * 128 + (p7 - 128)) * 128 + (p6 - 128)) * 128 + (p5 - 128)) * 128 + (p4 - 128)) * 128 + (p3 - 128)) * 128 + (p2 - 128)) * 128 + (p1 - 128)
  local b = ((((((b8 % 64 * 128 + (b7 - 128)) * 128 + (b6 - 128)) * 128 + (b5 - 128)) * 128 + (b4 - 128)) * 128 + (b3 - 128)) * 128 + (b2 - 128)) * 128 + (b1 - 128)
  local c = ((((((c8 % 64 * 128 + (c7 - 128)) * 128 + (c6 - 128)) * 128 + (c5 - 128)) * 128 + (c4 - 128)) * 128 + (c3 - 128)) * 128 + (c2 - 128)) * 128 + (c1 - 128)
  if r8 >= 192 then
    r = -r
  end
  if p8 >= 192 then
    p = -p
  end
  if b8 >= 192 then
    b = -b
  end
  if c8 >= 192 then
    c = -c
  end
  h = h - 128
  return h % 8, (h - h % 8) / 8, r, p, b, c
end

-- read_bounds decodes a calendar request's five boundaries at byte pos of
-- str (binary form).
local function read_bounds(str, pos)
  return struct.unpack('<i8i8i8i8i8', str, pos)
end

-- int7 decodes one seven-bit integer at byte pos of str (read_request7);
-- nil if a byte is out of range.
local function int7(str, pos)
  local v1, v2, v3, v4, v5, v6, v7, v8 = string.byte(str, pos, pos + 7)
  if v8 == nil or v1 < 128 or v2 < 128 or v3 < 128 or v4 < 128 or v5 < 128 or v6 < 128 or v7 < 128 or v8 < 128 then
    return nil
  end
  local v = ((((((v8 % 64 * 128 + (v7 - 128)) * 128 + (v6 - 128)) * 128 + (v5 - 128)) * 128 + (v4 - 128)) * 128 + (v3 - 128)) * 128 + (v2 - 128)) * 128 + (v1 - 128)
  if v8 >= 192 then
    v = -v
  end
  return v
end

-- read_bounds7 is read_bounds in the seven-bit form; nil if a byte is out
-- of range.
local function read_bounds7(str, pos)
  local b0, b1, b2, b3, b4 = int7(str, pos), int7(str, pos + 8), int7(str, pos + 16), int7(str, pos + 24), int7(str, pos + 32)
  if b0 == nil or b1 == nil or b2 == nil or b3 == nil or b4 == nil then
    return nil
  end
  return b0, b1, b2, b3, b4
end

-- read_header decodes the header at the start of str: now_ms, keep_ms,
-- write, the request reader of its form, the calendar boundaries' reader
-- and the offset of its single bytes (req_len); nil if it is malformed.
local function read_header(str)
  if #str < HDR_LEN then
    return nil
  end
  local form = string.byte(str, 1)
  if form == 98 then -- 'b'
    local now, keep, write = struct.unpack('<i8i8B', str, 2)
    return now, keep, write, read_request, read_bounds, 0
  elseif form ~= 115 then -- 's'
    return nil
  end
  local n1, n2, n3, n4, n5, n6, n7, n8, k1, k2, k3, k4, k5, k6, k7, k8, w = string.byte(str, 2, HDR_LEN)
  if n1 < 128 or k1 < 128 or w < 128 then
    return nil
  end
  local now = ((((((n8 % 64 * 128 + (n7 - 128)) * 128 + (n6 - 128)) * 128 + (n5 - 128)) * 128 + (n4 - 128)) * 128 + (n3 - 128)) * 128 + (n2 - 128)) * 128 + (n1 - 128)
  if n8 >= 192 then
    now = -now
  end
  local keep = ((((((k8 % 64 * 128 + (k7 - 128)) * 128 + (k6 - 128)) * 128 + (k5 - 128)) * 128 + (k4 - 128)) * 128 + (k3 - 128)) * 128 + (k2 - 128)) * 128 + (k1 - 128)
  if k8 >= 192 then
    keep = -keep
  end
  return now, keep, w - 128, read_request7, read_bounds7, 128
end

-- The reply is one string: REPLY_FMT per request, in request order:
-- allowed (0 or 1), limit, remaining, retry_after_ms (-1: never),
-- reset_after_ms, ttl_ms, wait_ms (the leaky bucket's wait; 0 for the
-- others). Decoded by redisstore's decodeReply.
local REPLY_FMT = '<Bi8i8i8i8i8i8'

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
-- refill, for a token bucket; the queue's end, for a leaky bucket; a,
-- the window start, for the windows) is
-- stored minus STATE_EPOCH_MS, so it takes 5 bytes until about 2043
-- instead of 6: a token bucket of 100 per hour then packs into 12 bytes,
-- and Redis 7.0 keeps a value of up to 12 bytes in the same allocation as
-- its object header, so its key costs 88 bytes of MEMORY USAGE (104 at 13
-- bytes).
local STATE_EPOCH_MS = 1767225600000 -- 2026-01-01T00:00:00Z

-- int_fmt is the struct item of an n-byte integer, n in 0..8 ('i0'
-- reads and writes nothing, the value 0): a constant, so no string is
-- formatted.
local function int_fmt(n)
  if n <= 4 then
    if n <= 1 then
      if n == 0 then
        return 'i0'
      end
      return 'i1'
    elseif n == 2 then
      return 'i2'
    elseif n == 3 then
      return 'i3'
    end
    return 'i4'
  elseif n <= 6 then
    if n == 5 then
      return 'i5'
    end
    return 'i6'
  elseif n == 7 then
    return 'i7'
  end
  return 'i8'
end

-- load_counter reads the state at key of a counter algorithm alg (token
-- bucket, sliding window, fixed window, leaky bucket), times made absolute: a, b, c,
-- all 0 for no state; nil if it is malformed.
local function load_counter(key, alg)
  local str = redis.call('GET', key)
  if str == false then
    return 0, 0, 0
  end
  local len = #str
  if len < 1 then
    return nil
  end
  local h = string.byte(str, 1)
  local lc = h % 8
  local la = (h - lc) / 8
  local lb = len - 1 - la - lc
  if la > 7 or lb < 0 or lb > 8 then
    return nil
  end
  -- One struct.unpack; its format is a concatenation of constants, a
  -- string Redis' Lua already holds after the first call.
  local a, c, b = struct.unpack('<' .. int_fmt(la) .. int_fmt(lc) .. int_fmt(lb), str, 2)
  -- The time field is stored relative to STATE_EPOCH_MS (1767225600000).
  if alg == 1 or alg == 5 then -- ALG_TOKEN_BUCKET, ALG_LEAKY_BUCKET: time in b
    return a, b + 1767225600000, c
  end
  return a + 1767225600000, b, c
end

-- int_len is the fewest bytes of two's complement v needs (0 for 0) and
-- the struct item of that many bytes (int_fmt's), from comparisons
-- rather than a loop: n bytes hold -2^(8n-1) .. 2^(8n-1) - 1.
local function int_len(v)
  if v == 0 then
    return 0, 'i0'
  end
  if v < 0 then
    v = -v - 1 -- the same length as v
  end
  if v < 2147483648 then -- 2^31
    if v < 32768 then -- 2^15
      if v < 128 then
        return 1, 'i1'
      end
      return 2, 'i2'
    elseif v < 8388608 then -- 2^23
      return 3, 'i3'
    end
    return 4, 'i4'
  elseif v < 140737488355328 then -- 2^47
    if v < 549755813888 then -- 2^39
      return 5, 'i5'
    end
    return 6, 'i6'
  elseif v < 36028797018963968 then -- 2^55
    return 7, 'i7'
  elseif v < 9223372036854775808 then -- 2^63
    return 8, 'i8'
  end
  return 9, 'i0' -- out of range: write_counter fails
end

-- write_counter writes the state a, b, c of alg to key with a TTL of
-- ttl + keep ms, or deletes it when ttl is 0. The PX is formatted with
-- '%d' here: cheaper than tostring's '%.14g', and far cheaper than
-- handing Redis a number.
local function write_counter(key, alg, a, b, c, ttl, keep)
  if ttl <= 0 then
    redis.call('DEL', key)
    return
  end
  if alg == 1 or alg == 5 then -- ALG_TOKEN_BUCKET, ALG_LEAKY_BUCKET: time in b
    b = b - 1767225600000 -- STATE_EPOCH_MS
  else
    a = a - 1767225600000
  end
  local la, fa = int_len(a)
  local lc, fc = int_len(c)
  local lb, fb = int_len(b)
  if la > 7 or lc > 7 or lb > 8 then
    error('floodgate: state value out of range')
  end
  local v = struct.pack('<B' .. fa .. fc .. fb, la * 8 + lc, a, c, b)
  redis.call('SET', key, v, 'PX', string.format('%d', ttl + keep))
end

