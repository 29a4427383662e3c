-- lib.lua: what every function of floodgate's Redis library shares:
-- integer helpers, the call's header, the reply's format, the codec of
-- the three-integer states, TTL strings and undo. The library is this
-- file, the algorithms' files and the drivers, joined (script.go).
--
-- Lua 5.1 numbers are doubles; every value computed is an integer below
-- 2^53 (algorithms/limit.go's validation keeps it there), held exactly;
-- only division rounds, so quo divides exactly.
--
-- Redis runs the library's body at FUNCTION LOAD with only `redis`
-- visible: no statement outside a function may read another global, and
-- functions get KEYS and ARGV as arguments. Everything here runs on
-- every call: locals, no tables or formatting per request, operators
-- rather than calls where it matters.

-- ALG is the algorithms' functions by number (ALG_<NAME>, declared
-- before this file by script.go from algolua.Constants); each
-- algorithm's file fills it. One signature:
--
--   alg(key, x, y, z, cost, flags, now_ms, keep, undo, b0, b1, b2, b3, b4)
--     -> allowed, remaining, retry, reset, ttl, wait, unrecorded, owed
--
-- with the request's fields as ARGV carries them (below), flags without
-- the calendar bit, keep the header's keep_ms, undo the group's undo
-- list or nil, b0..b4 a calendar limit's boundaries (b0 nil for others).
-- It reads the key's state, decides, writes at once unless dry or
-- denied, and returns the decision in ms (retry -1: never), the part of
-- a debt's cost not recorded and what the key owes after; nil when the
-- key holds a malformed state.
local ALG = {}

-- quo is Go's a / b on int64 (truncated toward zero), b > 0. For
-- 0 <= a, a + b <= 2^53, Lua's a % b is the true remainder r or r - b,
-- exactly, and (a - r) / b divides a multiple of b.
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

-- ARGV[1] starts with the call's header, HDR_LEN bytes: 'b', then
-- now_ms (Unix ms; negative: Redis' TIME), keep_ms (added to every TTL
-- written, >= 0), deadline_ms (Unix ms by Redis' TIME; a decide call
-- started at or after it writes nothing and answers LATE; 0: none),
-- write (0: a probe, never writes; 1 writes).
--
-- Then the requests, REQ_LEN bytes each, REQ_FMT: byte 1 is 8 * flags +
-- algorithm (ALG_*); flags bit 0 (1) dry run, bit 1 (2) debt
-- (algorithms.Debt), bit 2 (4) no-wait (algorithms.NoWait), bit 3 (8) a
-- calendar limit, whose five boundaries b0 < .. < b4 (Unix ms,
-- algorithms.Bounds, CAL_FMT) follow the request. Then the limit's x, y,
-- z: per_ms, scale (its rate in lowest terms, algorithms.Limit.Scale)
-- and capacity for a bucket; requests, period_ms (a calendar period's
-- length) and burst for the others; then cost (> 0 spends, 0 looks, < 0
-- refunds). Little-endian int64s; HDR_LEN, REQ_LEN, CAL_LEN come from
-- script.go.
local REQ_FMT, CAL_FMT = '<Bi8i8i8i8', '<i8i8i8i8i8'

-- redis.call, redis.pcall, type, struct.pack, struct.unpack and
-- string.byte as upvalues (cheaper than globals), bound on first call.
local rcall, rpcall, rtype, spack, sunpack, sbyte

-- clock_ms is Redis' clock (TIME, Unix ms, truncated) at the start of
-- the running call, false until read: every driver sets it before
-- anything is decided (false, or the TIME it read), so no value outlives
-- its call; redis_clock reads it when a decision needs it.
local clock_ms = false

local function redis_clock()
  -- Lua turns TIME's strings into numbers in the arithmetic itself.
  local t = rcall('TIME')
  local us = t[2]
  clock_ms = t[1] * 1000 + (us - us % 1000) / 1000
  return clock_ms
end

-- read_header decodes the header at the start of str: now_ms, keep_ms,
-- write, deadline_ms; nil if it is malformed.
local function read_header(str)
  if sunpack == nil then
    rcall, rpcall, rtype, spack, sunpack, sbyte = redis.call, redis.pcall, type, struct.pack, struct.unpack, string.byte
  end
  if #str < HDR_LEN then
    return nil
  end
  local form, now, keep, deadline, write = sunpack('<Bi8i8i8B', str)
  if form ~= 98 then -- 'b'
    return nil
  end
  return now, keep, write, deadline
end

-- LATE is the whole reply of a decide call refused for its deadline.
local LATE = '!'

-- The reply is one string of little-endian int64s, a record per request
-- in request order: REPLY_FMT (4 × remaining + allowed, retry_ms (-1:
-- never), reset_ms, ttl_ms, wait_ms); when there is no retry and the
-- TTL is the reset, SHORT_FMT (4 × remaining + allowed, -2 - 2 ×
-- reset_ms) or, with a wait, WAIT_FMT (4 × remaining + allowed, -3 - 2 ×
-- reset_ms, wait_ms). A request whose key holds a malformed state gets
-- REPLY_FMT with BAD_REPLY first (script.go) and 0s, and its group
-- decides and writes nothing. Decoded by decodeReply.
local REPLY_FMT, SHORT_FMT, WAIT_FMT = '<i8i8i8i8i8', '<i8i8', '<i8i8i8'

-- The three-integer states (sliding window, leaky bucket): a, b, c (Go's
-- State.A, B, C), little-endian two's complement in the fewest bytes each
-- needs, in one of two forms:
--
--   first    byte len(a) * 8 + len(c) (0..7 each), then a, c and b (the
--            remaining 0..8 bytes; a value of 0 takes none)
--   second   byte 64 + len(a) * 8 + len(c), byte len(e), then a, c, e
--            and b: e is the key's expiry (Unix ms by Redis' clock) less
--            the time field, the key living at least until then (0: not
--            known)
--
-- The time field (a window's a, a leaky bucket's b) is stored minus
-- STATE_EPOCH_MS (5 bytes until 2043). A write takes the second form
-- when it fits in 12 bytes (e in 3 bytes, or 4), so a state stays in
-- Redis' object header's allocation, else the first. v0.2.0 reads both
-- forms (its decisions ignore e) and writes the first, which records no
-- expiry. The two algorithms' ALG functions read them (state_fmt) and
-- write them (state_value, or in the shape read with the format read).
local STATE_EPOCH_MS = 1767225600000 -- 2026-01-01T00:00:00Z

-- INT_FMT[n] is the struct item of an n-byte integer ('i0' reads and
-- writes nothing, the value 0).
local INT_FMT = {[0] = 'i0', 'i1', 'i2', 'i3', 'i4', 'i5', 'i6', 'i7', 'i8'}

-- READ_FMT[(h * 8 + le) * 32 + len] reads h, le, a, c, e and b from a
-- whole state of header byte h, len bytes and le bytes of e (0 in the
-- first form, whose le and e read as 'i0': 0), and writes a state of
-- that shape; PACK_FMT[(h * 8 + le) * 9 + lb] writes h, le, a, c, e and
-- b (le and e as 'i0' in the first form). Built on first use (read_fmt,
-- pack_fmt) and kept for the library's life.
local READ_FMT, PACK_FMT = {}, {}

-- read_fmt builds and keeps the reading format of h, le (0 for the first
-- form) and len, and returns it; nil when they make no state.
local function read_fmt(h, le, len)
  local lc, head = h % 8, 1
  local la, second = (h - lc) / 8, 'i0'
  if h >= 64 then
    la, head, second = la - 8, 2, 'B'
  end
  local lb = len - head - la - lc - le
  if la > 7 or lb < 0 or lb > 8 then
    return nil
  end
  local f = '<B' .. second .. INT_FMT[la] .. INT_FMT[lc] .. INT_FMT[le] .. INT_FMT[lb]
  READ_FMT[(h * 8 + le) * 32 + len] = f
  return f
end

-- state_fmt is the format (READ_FMT's) that reads str, a value of len
-- bytes, nil when it holds no state. An algorithm reads its states with
-- the format of the last one of their length first: state_fmt keeps it
-- in shape[len], and its 256 * h + le (which the value read must show:
-- both are bytes, or le the first form's 0) in shape_hl[len].
local function state_fmt(str, len, shape, shape_hl)
  local h, le = sbyte(str, 1, 2)
  if h == nil or len > 31 then
    return nil
  elseif h < 64 then
    le = 0
  elseif h >= 128 or le == nil or le > 7 then
    return nil
  end
  local f = READ_FMT[(h * 8 + le) * 32 + len] or read_fmt(h, le, len)
  if f then
    shape[len], shape_hl[len] = f, h * 256 + le
  end
  return f
end

-- pack_fmt builds and keeps the writing format of h, le and lb, and
-- returns it. Every value written is below 2^53 (7 bytes at most); a
-- longer a or b, which no decision makes, fails here.
local function pack_fmt(h, le, lb)
  local lc = h % 8
  local la = (h - lc) / 8
  local sec = 'i0'
  if le > 0 then
    la, sec = la - 8, 'B'
  end
  if la > 7 or lb > 7 then
    error('floodgate: state value out of range')
  end
  local f = '<B' .. sec .. INT_FMT[la] .. INT_FMT[lc] .. INT_FMT[le] .. INT_FMT[lb]
  PACK_FMT[(h * 8 + le) * 9 + lb] = f
  return f
end

-- int_len is the fewest bytes two's complement v needs (0 for 0); 9
-- when out of range.
local function int_len(v)
  if v < 0 then
    v = -v - 1 -- the same length as v
  elseif v == 0 then
    return 0
  end
  -- n bytes hold below 2^(8n - 1)
  if v < 32768 then
    if v < 128 then
      return 1
    end
    return 2
  elseif v < 2147483648 then
    if v < 8388608 then
      return 3
    end
    return 4
  elseif v < 549755813888 then
    return 5
  elseif v < 140737488355328 then
    return 6
  elseif v < 36028797018963968 then
    return 7
  elseif v < 9223372036854775808 then
    return 8
  end
  return 9
end

-- state_value is the value of the state a, c, b (the time field less
-- STATE_EPOCH_MS) recording e (the key's expiry less the time field; 0:
-- none), c in lc bytes (nil: the fewest), and whether it took the second
-- form (which records e). Each integer takes the fewest bytes; the time
-- field 5 from 2026-01-26 to 2043, a count mostly 0 or 1.
local function state_value(a, c, b, e, lc)
  local la, lb = int_len(a), int_len(b)
  if lc == nil then
    lc = int_len(c)
  end
  local h, n, le = la * 8 + lc, la + lc + lb, 0
  if e >= 8388608 or e < -8388608 then -- 2^23
    if n < 7 and e >= -2147483648 and e < 2147483648 then -- 2^31: 12 bytes at most
      h, le = h + 64, 4
    end
  elseif n < 8 and e ~= 0 then
    h, le = h + 64, 3
  end
  return spack(PACK_FMT[(h * 8 + le) * 9 + lb] or pack_fmt(h, le, lb), h, le, a, c, e, b), le > 0
end

-- px_string is the PX string of a write whose state must live px ms (>
-- 0): px rounded up to a step of at most 1/64 of it (1 ms below 1,024,
-- then 16, 256, ... below 2^14, 2^18, ...), so a key outlives its state
-- by at most 1/64 (past its TTL a state decides like none) and the
-- strings, kept in PX_STR for the library's life, are few. Beyond 2^38
-- ms it formats px as it is. PX_NUM[s] is the number of a string s it
-- kept (nil beyond 2^38 ms, where s is px).
local PX_STR, PX_NUM = {}, {}

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
    s = px .. ''
    PX_STR[px], PX_NUM[s] = s, px
  end
  return s
end

-- num_string is the argument string of an integer v (a cost, a count
-- added): Redis turns a Lua number argument into a string with
-- '%.17g', which costs more than the command it is for, so a script
-- sends strings, each made once and kept in NUM_STR (emptied at 4,096,
-- so a stream of distinct costs cannot grow it without bound). Callers
-- look NUM_STR[v] up first.
local NUM_STR, NUM_N = {}, 0

local function num_string(v)
  if NUM_N >= 4096 then
    NUM_STR, NUM_N = {}, 0
  end
  local s = string.format('%d', v)
  NUM_STR[v], NUM_N = s, NUM_N + 1
  return s
end

-- Undo. A group of several requests is all or nothing: each request
-- writes at once, and when one is denied undo_all puts back what the
-- group wrote, newest first, in the same call. Before a write, an
-- algorithm given the undo list (UNDO; nil for a group's last request,
-- which a deny leaves unwritten) remembers the key, what it held (the
-- string, false for no key, or a number INCRBY added, taken back by
-- DECRBY) and, for a write that may shorten the TTL (short: a refund, a
-- delete), the key's PTTL (false otherwise: put back with KEEPTTL).
--
-- UNDO holds the running group's records in its first UNDO_N fields,
-- three a record (what lies past them is an earlier group's): one table
-- for the library's life, so a group allocates none. Every driver that
-- hands it out sets UNDO_N to 0 when a group starts, so no record
-- outlives its group, not even one of a call that failed.
local UNDO, UNDO_N = {}, 0

local function remember(undo, key, old, short)
  local n = UNDO_N
  undo[n + 1], undo[n + 2], undo[n + 3] = key, old, false
  UNDO_N = n + 3
  if short and old then
    local pttl = redis.call('PTTL', key)
    if pttl > 0 then
      undo[n + 3] = pttl
    end
  end
end

-- undo_all undoes the running group's writes, newest first, and empties
-- its records.
local function undo_all()
  for i = UNDO_N - 2, 1, -3 do
    local key, old, pttl = UNDO[i], UNDO[i + 1], UNDO[i + 2]
    if old == false then
      redis.call('DEL', key)
    elseif type(old) == 'number' then
      redis.call('DECRBY', key, NUM_STR[old] or num_string(old))
    elseif pttl then
      redis.call('SET', key, old, 'PX', pttl)
    else
      redis.call('SET', key, old, 'KEEPTTL')
    end
  end
  UNDO_N = 0
end
