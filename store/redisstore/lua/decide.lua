-- decide.lua: the driver of every Decide call: a loop over the call's
-- groups and their requests, each decided by its ALG function (lib.lua).
--
-- KEYS[i]  the state key of request i; all in one slot. A key may repeat
--          (it then sees the earlier requests' writes).
-- ARGV[g]  group g: one Decide call's requests, REQ_LEN bytes each, in
--          KEYS order; ARGV[1] starts with the HDR_LEN-byte header. The
--          store puts concurrent Decide calls of one slot in one call.
--
-- Reply: a record (lib.lua: REPLY_FMT or a shorter one) per request, in
-- request order; LATE alone when Redis started the call at or after the
-- header's deadline.
--
-- A group is all or nothing: when a request with a positive cost is
-- denied or its key holds a malformed state (BAD_REPLY), the group's
-- writes are undone at its end (lib.lua's undo). A probe (write byte 0)
-- undoes every group's writes. The requests come from the store's Go,
-- which validated every limit; a bad shape is an error reply (a bug).

-- HEAD is ALG by a request's first byte for every flag set without the
-- calendar bit: one lookup finds the function and refuses an unknown
-- algorithm or flag. A calendar request or a bad byte finds nil.
local HEAD = {}
for alg = 0, 7 do
  for flags = 0, 7 do
    HEAD[8 * flags + alg] = ALG[alg]
  end
end

-- I8_FMT[k] is the struct format of k int64s, built on first use and
-- kept for the library's life (k < 205: decide packs from 200).
local I8_FMT = {}

-- pack_i8 packs vals[1..k], int64s.
local function pack_i8(vals, k)
  local f = I8_FMT[k]
  if f == nil then
    f = '<' .. string.rep('i8', k)
    I8_FMT[k] = f
  end
  return spack(f, unpack(vals, 1, k))
end

-- VALS holds a decide call's reply integers not yet packed, from 1 to
-- the call's count (what lies past it is an earlier call's): one table
-- for the library's life, so a call allocates none.
local VALS = {}

-- refuse undoes the running group's writes (lib.lua's undo_all) and
-- answers the error msg: a call the store's Go never makes.
local function refuse(msg)
  undo_all()
  return redis.error_reply('ERR floodgate: ' .. msg)
end

local function decide(KEYS, ARGV)
  local n = #KEYS
  UNDO_N = 0
  local now, keep, write, deadline = read_header(ARGV[1] or '')
  if now == nil or keep < 0 or write < 0 or write > 1 then
    return refuse('bad header')
  end
  clock_ms = false
  if now < 0 or deadline > 0 then
    local clock = redis_clock()
    if deadline > 0 and clock >= deadline then
      return LATE
    end
    if now < 0 then
      now = clock
    end
  end
  local probe = write == 0 -- every group's writes are undone
  -- The reply's integers, every record's field an int64 (lib.lua): vals
  -- holds k of them not yet packed, parts the strings packed before.
  local vals, k, parts = VALS, 0, nil
  local r = 0
  local pos = HDR_LEN + 1 -- where the group's next request starts
  for g = 1, #ARGV do
    local blob = ARGV[g]
    local len = #blob
    local stop = len - REQ_LEN + 1 -- the last place a whole request starts
    local failed -- nil until a request fails
    UNDO_N = 0
    repeat
      r = r + 1
      if r > n or pos > stop then
        if pos > len then
          return refuse('an empty group')
        end
        return refuse(r .. ' requests for ' .. n .. ' keys, or a short request')
      end
      local h, x, y, z, cost = sunpack(REQ_FMT, blob, pos)
      pos = pos + REQ_LEN
      local f = HEAD[h]
      local flags = (h - h % 8) / 8
      local b0, b1, b2, b3, b4
      if f == nil then -- a calendar limit, its boundaries following, or a bad byte
        if flags >= 8 and flags < 16 then
          if pos + CAL_LEN - 1 > len then
            return refuse('a short calendar request')
          end
          b0, b1, b2, b3, b4 = sunpack(CAL_FMT, blob, pos)
          pos = pos + CAL_LEN
          if b0 < b1 and b1 < b2 and b2 < b3 and b3 < b4 then
            f, flags = ALG[h % 8], flags - 8
          end
        end
      end
      if f == nil or x < 1 or y < 1 or z < 0 then
        return refuse('bad arguments for request ' .. r)
      end
      local u = UNDO
      if pos > len and not failed and not probe then
        u = nil -- the group's last request: nothing after it can undo its write
      end
      local allowed, remaining, retry, reset, ttl, wait = f(KEYS[r], x, y, z, cost, flags, now, keep, u, b0, b1, b2, b3, b4)
      if allowed == 1 and retry == 0 and reset == ttl and wait == 0 then
        if n == 1 and pos > len and g == #ARGV and not probe then
          return spack(SHORT_FMT, 4 * remaining + 1, -2 - 2 * reset)
        end
        k = k + 2
        vals[k - 1] = 4 * remaining + 1
        vals[k] = -2 - 2 * reset
      else -- another record, a lone request's packed at once
        local lone = n == 1 and pos > len and g == #ARGV and not probe
        if allowed == nil then
          failed = true
          if lone then
            return spack(REPLY_FMT, BAD_REPLY, 0, 0, 0, 0)
          end
          vals[k + 1], vals[k + 2], vals[k + 3], vals[k + 4], vals[k + 5] = BAD_REPLY, 0, 0, 0, 0
          k = k + 5
        else
          if allowed == 0 and cost > 0 then
            failed = true
          end
          local a = 4 * remaining + allowed
          if retry ~= 0 or reset ~= ttl then
            if lone then
              return spack(REPLY_FMT, a, retry, reset, ttl, wait)
            end
            vals[k + 1], vals[k + 2], vals[k + 3], vals[k + 4], vals[k + 5] = a, retry, reset, ttl, wait
            k = k + 5
          elseif wait == 0 then
            if lone then
              return spack(SHORT_FMT, a, -2 - 2 * reset)
            end
            vals[k + 1], vals[k + 2] = a, -2 - 2 * reset
            k = k + 2
          else
            if lone then
              return spack(WAIT_FMT, a, -3 - 2 * reset, wait)
            end
            vals[k + 1], vals[k + 2], vals[k + 3] = a, -3 - 2 * reset, wait
            k = k + 3
          end
        end
      end
      if k >= 200 then -- packed in parts: unpack's results are bounded
        parts = parts or {}
        parts[#parts + 1] = pack_i8(vals, k)
        k = 0
      end
    until pos > len
    if failed or probe then
      undo_all()
    end
    pos = 1
  end
  if r ~= n then
    UNDO_N = 0 -- every group decided: nothing to undo
    return refuse(r .. ' requests for ' .. n .. ' keys')
  end
  if parts then
    parts[#parts + 1] = pack_i8(vals, k)
    return table.concat(parts)
  end
  return pack_i8(vals, k)
end
