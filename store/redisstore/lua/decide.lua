-- decide.lua: the driver of every Decide call: a loop over the call's
-- groups and their requests, each decided by its ALG function (lib.lua).
--
-- KEYS[i]  the state key of request i; all in one slot. A key may repeat
--          (it then sees the earlier requests' writes).
-- ARGV[g]  group g: one Decide call's requests, REQ_LEN bytes each, in
--          KEYS order; ARGV[1] starts with the HDR_LEN-byte header. The
--          store puts concurrent Decide calls of one slot in one call.
--
-- Reply: REPLY_FMT (lib.lua) per request, in request order; LATE alone
-- when Redis started the call at or after the header's deadline.
--
-- A group is all or nothing: when a request with a positive cost is
-- denied or its key holds a malformed state (BAD_REPLY), the group's
-- writes are undone at its end (lib.lua's undo). A probe (write byte 0)
-- undoes every group's writes. The requests come from the store's Go,
-- which validated every limit; a bad shape is an error reply (a bug).

local function decide(KEYS, ARGV)
  local n = #KEYS
  local now, keep, write, deadline = read_header(ARGV[1] or '')
  if now == nil or keep < 0 or write < 0 or write > 1 then
    return redis.error_reply('ERR floodgate: bad header')
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
  local reply = {}
  local r = 0
  for g = 1, #ARGV do
    local blob, pos = ARGV[g], 1
    if g == 1 then
      pos = HDR_LEN + 1
    end
    local len = #blob
    local undo, failed = nil, false
    if pos > len then
      return redis.error_reply('ERR floodgate: an empty group')
    end
    if probe then
      undo = {}
    end
    while pos <= len do
      r = r + 1
      if r > n or pos + REQ_LEN - 1 > len then
        undo_all(undo)
        return redis.error_reply('ERR floodgate: ' .. r .. ' requests for ' .. n .. ' keys, or a short request')
      end
      local h, x, y, z, cost = sunpack(REQ_FMT, blob, pos)
      pos = pos + REQ_LEN
      local alg = h % 8
      local flags = (h - alg) / 8
      local b0, b1, b2, b3, b4
      if flags >= 8 and flags < 16 then -- a calendar limit: its boundaries follow
        if pos + CAL_LEN - 1 > len then
          undo_all(undo)
          return redis.error_reply('ERR floodgate: a short calendar request')
        end
        flags = flags - 8
        b0, b1, b2, b3, b4 = sunpack(CAL_FMT, blob, pos)
        pos = pos + CAL_LEN
      end
      local f = ALG[alg]
      if f == nil or flags > 7 or x < 1 or y < 1 or z < 0 or (b0 and not (b0 < b1 and b1 < b2 and b2 < b3 and b3 < b4)) then
        undo_all(undo)
        return redis.error_reply('ERR floodgate: bad arguments for request ' .. r)
      end
      if undo == nil and pos <= len then -- more requests in the group
        undo = {nil, nil, nil, nil, nil, nil} -- room for two records, grown by none
      end
      local u = undo
      if pos > len and not failed and not probe then
        u = nil -- the group's last request: nothing after it can undo its write
      end
      local allowed, remaining, retry, reset, ttl, wait = f(KEYS[r], x, y, z, cost, flags, now, keep, u, b0, b1, b2, b3, b4)
      local out
      if allowed == nil then
        failed, out = true, BAD_REPLY
      else
        if allowed == 0 and cost > 0 then
          failed = true
        end
        if retry ~= 0 or reset ~= ttl then
          out = spack(REPLY_FMT, 4 * remaining + allowed, retry, reset, ttl, wait)
        elseif wait == 0 then
          out = spack(SHORT_FMT, 4 * remaining + allowed, -2 - 2 * reset)
        else
          out = spack(WAIT_FMT, 4 * remaining + allowed, -3 - 2 * reset, wait)
        end
      end
      if n == 1 and pos > len and g == #ARGV and not probe then
        return out
      end
      reply[r] = out
    end
    if undo and (failed or probe) then
      undo_all(undo)
    end
  end
  if r ~= n then
    return redis.error_reply('ERR floodgate: ' .. r .. ' requests for ' .. n .. ' keys')
  end
  return table.concat(reply)
end
