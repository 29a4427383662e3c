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
-- an operator (%, #) 10-20 (callgrind,
-- bench/history/14-scripts-round-3-2026-11-30.md).

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
--   write (0 probes: decides, never writes;
--   1 writes; 2 writes, and every group is one counter request:
--   decide.lua's direct path; 3 writes, and every group is one sliding
--   window log request: decide.lua's decide_log).
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
--               calendar limit, CAL_LEN more bytes follow the request;
--               bit 4 (16), on decide.lua's direct path only: the key
--               is an earlier request's of the call (so it is read
--               after that one's write, not from the call's MGET).
--               The drivers reject any other bit.
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
-- (algorithms.Bounds; counter.lua's decide_calendar picks the period of
-- the script's now among them). Requests are so of two lengths, REQ_LEN
-- and REQ_LEN + CAL_LEN; req_len tells them by their first byte.
--
-- Integers are little-endian int64s: struct '<i8i8B' for the header's
-- fields and '<Bi8i8i8i8' for a request, one struct.unpack a request.
-- HDR_LEN, REQ_LEN and CAL_LEN are defined by script.go (hdrLen, reqLen,
-- calLen), which puts them before this file.

-- req_len is the length of the request whose first byte is h.
local function req_len(h)
  if h % 128 >= 64 then -- flag bit 3: a calendar request
    return REQ_LEN + CAL_LEN
  end
  return REQ_LEN
end

-- read_request decodes the binary request at byte pos of str: algorithm,
-- flags, the limit's numbers x, y, z, cost. str holds REQ_LEN bytes from
-- pos (the drivers check the lengths first).
local function read_request(str, pos)
  local h, r, p, b, c = struct.unpack('<Bi8i8i8i8', str, pos)
  return h % 8, (h - h % 8) / 8, r, p, b, c
end

-- read_bounds decodes a calendar request's five boundaries at byte pos of
-- str (binary form).
local function read_bounds(str, pos)
  return struct.unpack('<i8i8i8i8i8', str, pos)
end

-- read_header decodes the header at the start of str: now_ms, keep_ms,
-- write, deadline_ms; nil if it is malformed.
local function read_header(str)
  if #str < HDR_LEN or string.byte(str, 1) ~= 98 then -- 'b'
    return nil
  end
  local now, keep, deadline, write = struct.unpack('<i8i8i8B', str, 2)
  return now, keep, write, deadline
end

-- LATE is the whole reply of a decide call refused for its deadline.
local LATE = '!'

-- A request whose key holds a state no script writes (a value set by
-- hand, another program's key) fails alone: its group decides and
-- writes nothing, and its reply says so, while the other groups of the
-- call are decided as usual (a group whose request failed writes
-- nothing, as a denied one). BAD_REPLY (defined by script.go, REPLY_FMT
-- with allowed 2 and the rest 0) is each such request's part of the
-- reply.

-- The reply of every path is one string: REPLY_FMT per request, in request order:
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
-- bytes). A fixed window's c is its key's expiry (write_counter), 2 to 4 bytes for periods of a second to a day, 5 for a
-- calendar month: a monthly quota of more than 127 counts packs into 13.
--
-- A second form adds a fourth field, e, for the key's own expiry:
--
--   byte 1     64 + len(a) * 8 + len(c)
--   byte 2     len(e), 0..7 bytes
--   a, c       as in the first form
--   e          len(e) bytes: Redis keeps the key at least until the time
--              field + e ms (0: not known)
--   b          the remaining 0..8 bytes
--
-- This version reads it and writes the first form: a state must be
-- readable by every replica of a rolling upgrade, so a version that
-- writes the second form (a bucket could then keep its key's TTL while
-- the expiry covers it, as the fixed window does) can follow only a
-- version that reads it. The decisions ignore e; a write over such a
-- state is a first-form state with its TTL set. A fixed window's c is
-- its key's expiry in both forms.
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

-- SECOND_FMT[(h * 8 + le) * 9 + lb] is the struct format that reads a
-- second-form state (h its header byte less 64, le and lb the lengths of
-- e and b) from its byte 3: '<', then the four items. Kept like
-- STATE_FMT.
local SECOND_FMT = {}

-- decode_second reads a second-form state str of len bytes whose first
-- byte is h (64..255): a, c, b; nil if it is malformed.
local function decode_second(str, h, len)
  if h >= 128 or len < 2 then
    return nil
  end
  h = h - 64
  local lc = h % 8
  local la = (h - lc) / 8
  local le = string.byte(str, 2)
  local lb = len - 2 - la - lc - le
  if le > 7 or lb < 0 or lb > 8 then
    return nil
  end
  local i = (h * 8 + le) * 9 + lb
  local f = SECOND_FMT[i]
  if f == nil then
    f = '<' .. int_fmt(la) .. int_fmt(lc) .. int_fmt(le) .. int_fmt(lb)
    SECOND_FMT[i] = f
  end
  local a, c, _, b = struct.unpack(f, str, 3)
  return a, c, b
end

-- decode_counter reads str, the state of a counter algorithm alg (token
-- bucket, sliding window, fixed window, leaky bucket) as GET answered it
-- (false for no key), times made absolute: a, b, c, all 0 for no state,
-- the string read ('' for no state) and its header byte (0 for no
-- state), which write_counter takes back; nil if it is malformed.
local function decode_counter(str, alg)
  if str == false then
    return 0, 0, 0, '', 0
  end
  local len = #str
  if len < 1 then
    return nil
  end
  local h = string.byte(str, 1)
  local lc = h % 8
  local la = (h - lc) / 8
  local a, c, b
  if la <= 7 then
    local lb = len - 1 - la - lc
    if lb < 0 or lb > 8 then
      return nil
    end
    a, c, b = struct.unpack(STATE_FMT[h * 9 + lb] or state_fmt(h, lb), str, 2)
  else -- the second form
    a, c, b = decode_second(str, h, len)
    if a == nil then
      return nil
    end
  end
  -- The time field is stored relative to STATE_EPOCH_MS.
  if alg == 1 or alg == 5 then -- ALG_TOKEN_BUCKET, ALG_LEAKY_BUCKET: time in b
    return a, b + STATE_EPOCH_MS, c, str, h
  end
  return a + STATE_EPOCH_MS, b, c, str, h
end

-- load_counter reads the state at key of alg: decode_counter of its GET.
local function load_counter(key, alg)
  return decode_counter(redis.call('GET', key), alg)
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
-- for the library's life, like STATE_FMT, so a TTL's string is
-- formatted once per library load rather than once a decision (the
-- '%.14g' sprintf behind the concatenation operator costs ~2,500
-- instructions; a number handed to redis.call is formatted too). At
-- most 1,024 strings per step below, about 8,000 in all.
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

-- write_counter writes the state a, b, c of alg to key with a TTL of
-- ttl + keep ms (px_string's rounding up), or deletes it when ttl is 0.
-- ra, rc, rlen and rh are the state the key held when read (its a and c,
-- the length of its value and its header byte; 0, 0, 0, 0 for none): a
-- c written as read takes the bytes it was read in, known from rh
-- without int_len's call (a token bucket's scale, a leaky bucket's
-- rate and a fixed window's expiry rarely change).
--
-- A fixed window's c, which no version's fixed window reads, is its key's
-- expiry, ms after a: Redis keeps the key at least until a + c (0:
-- unknown, as in a state of an earlier version, which wrote 0). A
-- window's state needs its key until the window's end, the same for every
-- write in it, so a write whose key already lives that long keeps its TTL
-- instead of setting it again (SET ... PX costs Redis about 6,500
-- instructions more): a value of the stored length is written over it in
-- place (SETRANGE, which Redis answers with a number rather than the
-- status SET's reply becomes in Lua, a table: 1,500 instructions less),
-- one of another length with SET ... KEEPTTL (SETRANGE over a longer
-- stored value would leave its last bytes, and over a shorter one grow
-- the string with spare room). The expiry is a property of the key, not
-- of the limit, so it stays right when the limit changes; a calendar
-- quota's state is a fixed window's.
-- (An absolute PXAT, which Redis need not rewrite for its replicas,
-- measured 1,600 instructions a decision more: its 13 digits cost more
-- to format and parse.)
local function write_counter(key, alg, a, b, c, ttl, keep, now, ra, rc, rlen, rh)
  if ttl <= 0 then
    redis.call('DEL', key)
    return
  end
  local kept = false
  if alg == 4 then -- ALG_FIXED_WINDOW: c is the key's expiry
    local need = now + ttl + keep
    if rc > 0 and ra + rc >= need then
      c, kept = ra + rc - a, true
    else
      c = need - a
    end
  end
  -- The time field takes 5 bytes from 2026-01-26 to 2043 (2^31 to
  -- 2^39 ms after STATE_EPOCH_MS): known without int_len's call.
  local la, lb
  if alg == 1 or alg == 5 then -- ALG_TOKEN_BUCKET, ALG_LEAKY_BUCKET: time in b
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
  if kept then
    local v = struct.pack(f, h, a, c, b)
    if #v == rlen then
      redis.call('SETRANGE', key, '0', v)
    else
      redis.call('SET', key, v, 'KEEPTTL')
    end
  else
    redis.call('SET', key, struct.pack(f, h, a, c, b), 'PX', px_string(ttl + keep))
  end
end
