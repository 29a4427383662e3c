-- lib.lua: what every function of floodgate's Redis library shares: the
-- integer helpers, the call's header, the reply's format, the state codec
-- of the states kept as three integers and the TTL strings. The library is this file, the
-- algorithms' files and the drivers (decide.lua, settle.lua, demand.lua,
-- forget.lua), joined (store/redisstore/script.go).
--
-- Lua 5.1 numbers are doubles. Every value the algorithms compute is an
-- integer below 2^53 (algorithms.MaxScaled and the validation in
-- algorithms/limit.go keep it there), and doubles hold such integers
-- exactly; only division rounds, so quo takes the remainder first and
-- divides exactly.
--
-- Redis runs the library's body once, at FUNCTION LOAD, with only `redis`
-- visible: so no statement outside a function here (or in the other
-- files) may read another global (math, string, struct), and no function
-- reads KEYS or ARGV as globals (a function gets them as arguments).
--
-- Everything here runs on every call, so it is lean: no tables or
-- string formatting per request, locals only, and in the hot paths the
-- VM's operators rather than calls (a Lua or C function call costs Redis
-- far more than an operator).

-- The algorithms' numbers, ALG_<NAME> (declared before this file from the
-- algorithm table: algolua.Constants, script.go's luaLib), and ALG, the
-- table of their functions by number, which each
-- algorithm's file fills and the drivers call (decide.lua). Every
-- function has one signature:
--
--   alg(key, x, y, z, cost, flags, now_ms, keep, undo, b0, b1, b2, b3, b4)
--     -> allowed, remaining, retry, reset, ttl, wait, unrecorded, owed
--
-- with the request's fields as ARGV carries them (below), flags its
-- flags without the calendar bit (bit 0 dry, also set for a probe; bit 1
-- debt; bit 2 no-wait), keep the header's keep_ms, undo the group's undo
-- list (below) or nil, b0..b4 a calendar limit's boundaries (b0 nil for
-- others). It reads the key's state, decides, writes the new state at
-- once unless dry or denied, and returns the decision's fields in ms
-- (retry -1: never), the part of a debt's cost not recorded and what the
-- key owes after; nil when the key holds a malformed state.
local ALG = {}

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

-- window_of is the start of the window of w ms that holds now (quo(now,
-- w) * w; now >= 0, quo's steps written out) and a % w, which is 0
-- exactly when a is a window start (Lua's % answers the remainder or
-- the remainder - w, never 0 for a remainder that is not).
local function window_of(now, a, w)
  local r = now % w
  if r < 0 then
    r = r + w
  end
  return now - r, a % w
end

-- ARGV. ARGV[1] starts with the call's header, HDR_LEN bytes:
--
--   byte 1      'b' (the form; the only one)
--   then now_ms (Unix ms; negative means Redis' TIME), keep_ms (added to
--   every TTL written, >= 0), deadline_ms (Unix ms by Redis' TIME; a
--   decide call that starts at or after it decides and writes nothing and
--   answers LATE: its caller has given up and answered by its failure
--   mode, so a charge now would count a degraded answer; 0: none) and
--   write (0 probes: decides, never writes; 1 writes).
--
-- Then come the requests, REQ_LEN bytes each, struct REQ_FMT:
--
--   byte 1      8 * flags + algorithm (1 token_bucket, 2 sliding_window,
--               3 sliding_window_log, 4 fixed_window, 5 leaky_bucket);
--               flags bit 0 (1): dry run (decide as if charging, never
--               write); bit 1 (2): debt (algorithms.Debt: a positive
--               cost is charged even when it does not fit, bounded);
--               bit 2 (4): no-wait (a leaky bucket admits only what may
--               start now: algorithms.NoWait); bit 3 (8): a calendar
--               limit, CAL_LEN more bytes follow the request. The driver
--               rejects any other bit.
--   then the limit's three numbers x, y, z: for a token or leaky bucket
--   per_ms and scale (its rate in lowest terms, algorithms.Limit.Scale)
--   and its capacity; for the others requests per period (> 0),
--   period_ms (> 0; a calendar limit's is its current period's length,
--   and unused) and burst (unused); then cost (> 0 spends, 0 looks, < 0
--   refunds).
--
-- A calendar request (sliding_window or fixed_window only) is followed by
-- five integers, the period boundaries b0 < b1 < b2 < b3 < b4 in Unix ms
-- that floodgate computed from its own clock in the limit's time zone
-- (algorithms.Bounds; counter.lua's calendar picks the period of the
-- script's now among them).
--
-- Integers are little-endian int64s. HDR_LEN, REQ_LEN and CAL_LEN are
-- defined by script.go (hdrLen, reqLen, calLen), which puts them before
-- this file.
local REQ_FMT, CAL_FMT = '<Bi8i8i8i8', '<i8i8i8i8i8'

-- rcall, rpcall, rtype, spack, sunpack and sbyte are redis.call,
-- redis.pcall, type, struct.pack, struct.unpack and string.byte, bound by
-- read_header on the library's first call (at
-- FUNCTION LOAD only `redis` is visible): an upvalue costs the VM less
-- than a global's two lookups.
local rcall, rpcall, rtype, spack, sunpack, sbyte

-- read_header decodes the header at the start of str: now_ms, keep_ms,
-- write, deadline_ms; nil if it is malformed.
local function read_header(str)
  if sunpack == nil then
    rcall, rpcall, rtype, spack, sunpack, sbyte = redis.call, redis.pcall, type, struct.pack, struct.unpack, string.byte
  end
  if #str < HDR_LEN or string.byte(str, 1) ~= 98 then -- 'b'
    return nil
  end
  local now, keep, deadline, write = sunpack('<i8i8i8B', str, 2)
  return now, keep, write, deadline
end

-- LATE is the whole reply of a decide call refused for its deadline.
local LATE = '!'

-- The reply is one string: a record per request, in request order:
-- REPLY_FMT, 4 × remaining + allowed (0 or 1), retry_after_ms (-1:
-- never), reset_after_ms, ttl_ms, wait_ms (the leaky bucket's wait; 0
-- for the others); or, for a decision with no retry whose TTL is its
-- reset, SHORT_FMT, 4 × remaining + allowed, -2 - 2 × reset_after_ms
-- (below -1, which no retry is, and even), or with a wait WAIT_FMT,
-- 4 × remaining + allowed, -3 - 2 × reset_after_ms (odd), wait_ms.
-- Decoded by redisstore's decodeReply, which takes the limit from the
-- request. A request whose key holds a state no script writes
-- (a value set by hand, another program's key) fails alone: its group
-- decides and writes nothing, and its part of the reply is BAD_REPLY
-- (defined by script.go: allowed 2, remaining and the rest 0).
local REPLY_FMT, SHORT_FMT, WAIT_FMT = '<i8i8i8i8i8', '<i8i8', '<i8i8i8'

-- State codec of the three-integer states (sliding window, leaky
-- bucket): three signed integers a, b, c (Go's State.A, B, C)
-- packed as
--
--   byte 1     len(a) * 8 + len(c), each length 0..7 bytes
--   a          len(a) bytes, little-endian two's complement (absent if 0)
--   c          len(c) bytes
--   b          the remaining 0..8 bytes
--
-- using the fewest bytes each value needs. The time field (b, the queue's
-- end, for a leaky bucket; a, the window start, for a window) is
-- stored minus STATE_EPOCH_MS, so it takes 5 bytes until about 2043
-- instead of 6, and a value of up to 12 bytes shares its allocation with
-- Redis' object header.
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

-- STATE_FMT[h * 9 + lb] is the struct format that reads a state whose
-- header byte is h (len(a) * 8 + len(c)) and whose b takes lb bytes: '<',
-- then the three items (int_fmt's); PACK_FMT[h * 9 + lb] the one that
-- writes it, header byte first. Built on first use and kept: in the
-- function library these tables live as long as the library, so each
-- format is concatenated once per library load, not once a decision.
local STATE_FMT, PACK_FMT = {}, {}

-- state_fmt builds and keeps the formats of h and lb; it returns the
-- reading one.
local function state_fmt(h, lb)
  local i = h * 9 + lb
  local lc = h % 8
  local items = int_fmt((h - lc) / 8) .. int_fmt(lc) .. int_fmt(lb)
  STATE_FMT[i], PACK_FMT[i] = '<' .. items, '<B' .. items
  return STATE_FMT[i]
end

-- decode_counter reads str, a three-integer state as GET answered it
-- (false for no key), its time field made absolute (b when time_b,
-- else a): a, b, c, all 0 for no state, the string read ('' for no
-- state) and its header byte (0 for no state), which write_counter
-- takes back; nil if it is malformed.
local function decode_counter(str, time_b)
  if str == false then
    return 0, 0, 0, '', 0
  end
  local len = #str
  if len < 1 then
    return nil
  end
  local h = sbyte(str, 1)
  local lc = h % 8
  local la = (h - lc) / 8
  local lb = len - 1 - la - lc
  if la > 7 or lb < 0 or lb > 8 then
    return nil
  end
  local a, c, b = sunpack(STATE_FMT[h * 9 + lb] or state_fmt(h, lb), str, 2)
  if time_b then
    return a, b + STATE_EPOCH_MS, c, str, h
  end
  return a + STATE_EPOCH_MS, b, c, str, h
end

-- int_len is the fewest bytes of two's complement v needs (0 for 0),
-- from comparisons rather than a loop: n bytes hold -2^(8n-1) ..
-- 2^(8n-1) - 1; 9 when v is out of range.
local function int_len(v)
  if v == 0 then
    return 0
  end
  if v < 0 then
    v = -v - 1 -- the same length as v
  end
  if v < 2147483648 then -- 2^31
    if v < 32768 then -- 2^15
      if v < 128 then
        return 1
      end
      return 2
    elseif v < 8388608 then -- 2^23
      return 3
    end
    return 4
  elseif v < 140737488355328 then -- 2^47
    if v < 549755813888 then -- 2^39
      return 5
    end
    return 6
  elseif v < 36028797018963968 then -- 2^55
    return 7
  elseif v < 9223372036854775808 then -- 2^63
    return 8
  end
  return 9 -- out of range: write_counter fails
end

-- PX_STR[px] is the decimal string of px, a PX px_string rounded: kept
-- for the library's life, so a TTL's string is formatted once per
-- library load rather than once a decision (a number made a string, or
-- handed to redis.call, is formatted by sprintf). At most 1,024 strings
-- per step below, about 8,000 in all.
local PX_STR = {}

-- px_string is the PX string of a write whose state must live px ms
-- (> 0): px rounded up to a multiple of a step of at most 1/64 of it (1
-- ms below 1,024 ms, then 16 ms below 2^14, 256 below 2^18, and so on
-- by 16s), so a key lives at most 1/64 longer than its state matters,
-- which changes no decision (past its TTL a state decides like no
-- state), and the rounded values are few enough to keep. Beyond 2^38
-- ms (8.7 years) it formats px as it is.
local function px_string(px)
  local step
  if px < 262144 then -- 2^18
    if px < 1024 then
      step = 1
    elseif px < 16384 then
      step = 16
    else
      step = 256
    end
  elseif px < 67108864 then -- 2^26
    if px < 4194304 then
      step = 4096
    else
      step = 65536
    end
  elseif px < 17179869184 then -- 2^34
    if px < 1073741824 then
      step = 1048576
    else
      step = 16777216
    end
  elseif px < 274877906944 then -- 2^38
    step = 268435456
  else
    return string.format('%d', px)
  end
  local r = px % step
  if r > 0 then
    px = px + step - r
  end
  local s = PX_STR[px]
  if s == nil then
    s = px .. '' -- '%.14g': exact below 10^14
    PX_STR[px] = s
  end
  return s
end

-- write_counter writes the state a, b, c to key with a TTL of ttl + keep
-- ms (px_string's rounding up), or deletes it when ttl is 0; time_b says
-- which field holds the time (as decode_counter's). rc and rh are the c
-- and the header byte of the state the key held when read (0, 0 for
-- none): a c written as read takes the bytes it was read in, known from
-- rh without int_len's call (a leaky bucket's rate rarely changes).
local function write_counter(key, time_b, a, b, c, ttl, keep, rc, rh)
  if ttl <= 0 then
    rcall('DEL', key)
    return
  end
  -- The time field takes 5 bytes from 2026-01-26 to 2043 (2^31 to
  -- 2^39 ms after STATE_EPOCH_MS): known without int_len's call.
  local la, lb
  if time_b then
    b = b - STATE_EPOCH_MS
    la = int_len(a)
    if b >= 2147483648 and b < 549755813888 then
      lb = 5
    else
      lb = int_len(b)
    end
  else
    a = a - STATE_EPOCH_MS
    if a >= 2147483648 and a < 549755813888 then
      la = 5
    else
      la = int_len(a)
    end
    lb = int_len(b)
  end
  local lc
  if c == rc then
    lc = rh % 8
  else
    lc = int_len(c)
  end
  if la > 7 or lc > 7 or lb > 8 then
    error('floodgate: state value out of range')
  end
  local h = la * 8 + lc
  local i = h * 9 + lb
  local f = PACK_FMT[i]
  if f == nil then
    state_fmt(h, lb)
    f = PACK_FMT[i]
  end
  rcall('SET', key, spack(f, h, a, c, b), 'PX', px_string(ttl + keep))
end

-- Undo. A group of several requests (one Decide call) is decided all or
-- nothing: each request decides against what Redis holds and writes at
-- once, and when one of the group is denied, undo puts back what the
-- group's requests wrote, newest first, in the same script call (so no
-- other client sees the states between). An algorithm that writes to a
-- key while a group keeps an undo list (undo, a table; nil for a group
-- of one request, which a deny leaves unwritten) first adds three
-- entries with remember: the key, what it held (the string read, false
-- for no key, or a number: a count INCRBY added, taken back by DECRBY)
-- and, for a write that may shorten the key's TTL (a refund, a delete),
-- the key's PTTL before it (false otherwise: the value is put back
-- keeping the TTL, which a charge never shortens).
local function remember(undo, key, old, short)
  local n = #undo
  undo[n + 1], undo[n + 2], undo[n + 3] = key, old, false
  if short and old then
    local pttl = redis.call('PTTL', key)
    if pttl > 0 then
      undo[n + 3] = pttl
    end
  end
end

-- undo_all undoes the writes undo lists, newest first.
local function undo_all(undo)
  for i = #undo - 2, 1, -3 do
    local key, old, pttl = undo[i], undo[i + 1], undo[i + 2]
    if old == false then
      redis.call('DEL', key)
    elseif type(old) == 'number' then
      redis.call('DECRBY', key, old)
    elseif pttl then
      redis.call('SET', key, old, 'PX', pttl)
    else
      redis.call('SET', key, old, 'KEEPTTL')
    end
  end
end
