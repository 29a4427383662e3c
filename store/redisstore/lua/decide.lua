-- decide.lua: the decision driver, the library's function for every
-- Decide call. It decides N requests in one call, all or nothing per
-- group, and mirrors a sequence of store.Store Decide calls made of
-- algorithms.DecideMode calls.
--
-- KEYS[i]  the state key of request i. All keys must hash to one slot; a
--          key may repeat (it then sees the earlier requests' charges).
--          A counter's key holds lib.lua's state string, a sliding window
--          log's the ring of sliding_window_log.lua.
-- ARGV[g]  group g: the requests of one Decide call, REQ_LEN bytes each
--          (lib.lua), in KEYS order; ARGV[1] starts with the call's
--          HDR_LEN-byte header. Each group is decided all or nothing on
--          its own, after the groups before it, as if it were a separate
--          call: the Redis store so puts concurrent Decide calls of one
--          slot in one script call.
--
-- Reply: one string, REPLY_FMT (lib.lua) per request, in request order,
-- on every path (LATE alone when the call came after its deadline).
--
-- A group's changes are kept if no request of it with a positive cost
-- was denied, else dropped. If write is 1 or 2, each state kept changed is
-- written with its last TTL, or deleted when that TTL is 0 (the state
-- equals no state); a denied group writes nothing.
--
-- Two paths decide alike. The direct one takes the common call, which
-- the header's write byte 2 marks: every group one request of a counter
-- algorithm (no sliding window log), and the call writes (a lone Decide
-- of one request, or the batcher's merge of such calls); each request is decided and written in turn, so a key
-- repeated in a later group sees the earlier one's write, as separate
-- calls would, and no table is made but the reply's. The log's direct
-- path (decide_log, write byte 3) does the same for calls whose every
-- group is one sliding window log request. The general one keeps a
-- working state per key in tables and writes at the end.
--
-- The requests come from the store's own Go code, which validated every
-- limit (algorithms.Limit.Validate), built the bytes and marked the
-- direct calls: the direct path trusts them. What Redis holds is
-- checked: a malformed state fails its own group alone (lib.lua's
-- BAD_REPLY), which writes nothing; the other groups are
-- decided. A call Redis starts at or after the header's deadline
-- decides nothing and answers LATE (lib.lua).

-- decide mirrors algorithms.DecideMode on a state table: the new state
-- (s itself when unchanged) and the decision's fields. flags are the
-- request's flags (bit 1: debt, bit 2: no-wait); b0..b4 are a calendar
-- limit's boundaries (lib.lua), b0 nil for others.
local function decide_state(alg, requests, period_ms, burst, s, now, cost, flags, b0, b1, b2, b3, b4)
  if alg ~= ALG_SLIDING_WINDOW_LOG then
    local cap, allowed, remaining, retry, reset, ttl, sa, sb, sc, wait = decide_counter(alg, requests, period_ms, burst, s.a, s.b, s.c, now, cost, flags, b0, b1, b2, b3, b4)
    local s2 = s
    if allowed == 1 and cost ~= 0 then
      s2 = {a = sa, b = sb, c = sc}
    end
    return s2, allowed, cap, remaining, retry, reset, ttl, wait
  end
  if flags % 4 >= 2 and cost > 0 then -- debt (flag bit 1)
    -- The log records what its free slots hold, never owes.
    local _, d0 = sliding_window_log(requests, period_ms, s, now, 0)
    if d0.remaining < cost then
      cost = d0.remaining
    end
  end
  local never = false
  if cost > requests then
    cost, never = 0, true
  elseif cost < -requests then
    cost = -requests
  end
  local s2, d = sliding_window_log(requests, period_ms, s, now, cost)
  if never then
    return s, 0, d.limit, d.remaining, -1, d.reset, d.ttl, 0
  end
  return s2, d.allowed, d.limit, d.remaining, d.retry, d.reset, d.ttl, 0
end

-- load reads key's state for alg (a counter's with len, the length of
-- the value read: 0 for none); nil and a message if it is malformed.
local function load(key, alg)
  if alg == ALG_SLIDING_WINDOW_LOG then
    local s = log_load(key)
    if s == nil then
      return nil, 'malformed state'
    end
    return s
  end
  local a, b, c, str, h = load_counter(key, alg)
  if a == nil then
    return nil, 'malformed state'
  end
  return {a = a, b = b, c = c, len = #str, h = h}
end

-- decide_general is the general path (decide's header already read:
-- now, keep, write).
local function decide_general(KEYS, ARGV, now, keep, write)
  local n = #KEYS
  local shape = 'ERR floodgate: want ' .. REQ_LEN .. ' bytes per request (' .. (REQ_LEN + CAL_LEN) .. ' for a calendar one) in every group'
  local work, order, reply = {}, {}, {}
  local r = 0
  for g = 1, #ARGV do
    local blob = ARGV[g]
    local pos, len = 1, #blob
    if g == 1 then
      pos = HDR_LEN + 1
    end
    if pos > len then
      return redis.error_reply(shape)
    end
    local denied, bad = false, false
    local group = {} -- the keys this group touched
    while pos <= len do
      r = r + 1
      local step = req_len(string.byte(blob, pos))
      if pos + step - 1 > len then
        return redis.error_reply(shape)
      elseif r > n then
        return redis.error_reply('ERR floodgate: ' .. r .. ' requests for ' .. n .. ' keys')
      end
      local alg, flags, requests, period_ms, burst, cost = read_request(blob, pos)
      local cal, b0, b1, b2, b3, b4 = flags % 16 >= 8, nil, 0, 0, 0, 0
      if cal then -- flag bit 3: a calendar limit, its boundaries follow
        flags = flags - 8
        b0, b1, b2, b3, b4 = read_bounds(blob, pos + REQ_LEN)
      end
      pos = pos + step
      if alg < 1 or alg > 5 or flags > 7 or requests < 1 or period_ms < 1 or burst < 0 or (cal and ((alg ~= 2 and alg ~= 4) or not (b0 < b1 and b1 < b2 and b2 < b3 and b3 < b4))) then
        return redis.error_reply('ERR floodgate: bad arguments for request ' .. r)
      end
      local key = KEYS[r]
      local w = work[key]
      if w == nil then
        local s = load(key, alg)
        if s ~= nil then
          w = {alg = alg, state = s, changed = false, ttl = 0, kstate = s, kchanged = false, kttl = 0, read = s}
          work[key] = w
          order[#order + 1] = key
        end
      elseif w.alg ~= alg then
        return redis.error_reply('ERR floodgate: key ' .. key .. ' used with two algorithms')
      end
      if w == nil then -- a malformed state: the group fails (BAD_REPLY)
        bad = true
        reply[r] = BAD_REPLY
      else
      if w.group ~= g then
        w.group = g
        group[#group + 1] = key
      end
      local s2, allowed, cap, remaining, retry, reset, ttl, wait = decide_state(alg, requests, period_ms, burst, w.state, now, cost, flags, b0, b1, b2, b3, b4)
      if cost > 0 and allowed == 0 then
        denied = true
      end
      if flags % 2 == 0 and allowed == 1 and cost ~= 0 then
        w.state, w.changed, w.ttl = s2, true, ttl
      end
      reply[r] = struct.pack(REPLY_FMT, allowed, cap, remaining, retry, reset, ttl, wait)
      end
    end
    -- The group ends: keep its changes unless it was denied or failed.
    for _, key in ipairs(group) do
      local w = work[key]
      if denied or bad then
        w.state, w.changed, w.ttl = w.kstate, w.kchanged, w.kttl
      else
        if w.changed and w.ttl <= 0 then
          -- Kept with a TTL of 0: the state is deleted, so the groups after
          -- see no state, as separate Decide calls would.
          if w.alg == ALG_SLIDING_WINDOW_LOG then
            w.state = log_empty()
          else
            w.state = {a = 0, b = 0, c = 0}
          end
        end
        w.kstate, w.kchanged, w.kttl = w.state, w.changed, w.ttl
      end
    end
  end
  if r ~= n then
    return redis.error_reply('ERR floodgate: ' .. r .. ' requests for ' .. n .. ' keys')
  end

  if write >= 1 then
    for _, key in ipairs(order) do
      local w = work[key]
      if w.kchanged then
        local s = w.kstate
        if w.kttl <= 0 then
          redis.call('DEL', key)
        elseif w.alg == ALG_SLIDING_WINDOW_LOG then
          log_write(key, s, w.kttl + keep)
        else
          local r = w.read
          write_counter(key, w.alg, s.a, s.b, s.c, w.kttl, keep, now, r.a, r.c, r.len, r.h)
        end
      end
    end
  end
  return table.concat(reply)
end

-- decide_log is the log's direct path (decide's header already read:
-- now, keep), for the call the header's write byte 3 marks: every group
-- one sliding window log request, and the call writes. Like the direct
-- path of the counters, it decides and writes each request in turn and
-- trusts the requests; log_decide_whole takes the common one without a
-- table, and what it leaves (a ring larger than log_load reads whole, a
-- debt, a look or a refund, a cost above the limit) takes the general
-- path's steps: decide_state, then log_write.
local function decide_log(KEYS, ARGV, now, keep)
  local n = #KEYS
  local reply
  if n > 1 then
    reply = {}
  end
  for g = 1, n do
    local pos = 1
    if g == 1 then
      pos = HDR_LEN + 1
    end
    local h, requests, period_ms, _, cost = struct.unpack('<Bi8i8i8i8', ARGV[g], pos)
    local flags = (h - h % 8) / 8
    local key = KEYS[g]
    local str = redis.call('GETRANGE', key, '0', LOG_WHOLE_LAST)
    local r
    if cost > 0 and cost <= requests and flags % 4 < 2 then -- no debt (flag bit 1)
      r = log_decide_whole(key, str, requests, period_ms, cost, flags % 2 == 1, now, keep)
    end
    if r == nil then
      local s = log_parse(key, str)
      if s == nil then
        r = BAD_REPLY
      else
        local s2, allowed, cap, remaining, retry, reset, ttl, wait = decide_state(ALG_SLIDING_WINDOW_LOG, requests, period_ms, 0, s, now, cost, flags)
        if flags % 2 == 0 and allowed == 1 and cost ~= 0 then
          log_put(key, s2, ttl, keep)
        end
        r = struct.pack(REPLY_FMT, allowed, cap, remaining, retry, reset, ttl, wait)
      end
    end
    if n == 1 then
      return r
    end
    reply[g] = r
  end
  return table.concat(reply)
end

local function decide(KEYS, ARGV)
  local n = #KEYS
  local now, keep, write, deadline = read_header(ARGV[1] or '')
  if now == nil or keep < 0 or write < 0 or write > 3 then
    return redis.error_reply('ERR floodgate: bad header')
  end
  local t
  if now < 0 or deadline > 0 then
    -- sec * 1000 + floor(usec / 1000); Lua turns TIME's strings into
    -- numbers in the arithmetic itself, which costs less than tonumber.
    t = redis.call('TIME')
    local us = t[2]
    local clock = t[1] * 1000 + (us - us % 1000) / 1000
    if deadline > 0 and clock >= deadline then
      return LATE
    end
    if now < 0 then
      now = clock
    end
  end
  if write == 3 then return decide_log(KEYS, ARGV, now, keep) end
  if write ~= 2 then
    return decide_general(KEYS, ARGV, now, keep, write)
  end
  local sunpack = struct.unpack
  local reply, vals
  if n > 1 then
    reply = {}
    if n <= 4096 then -- unpack fails past the C stack's 8,000 values
      -- One MGET for every key, cheaper than a GET each; a request
      -- whose key an earlier one holds (flag bit 4) reads it again,
      -- after that one's write.
      vals = redis.call('MGET', unpack(KEYS))
    end
  end
  for g = 1, n do
    local blob, pos = ARGV[g], 1
    if g == 1 then
      pos = HDR_LEN + 1
    end
    local h, x, y, z, cost = sunpack('<Bi8i8i8i8', blob, pos)
    local alg = h % 8
    local flags = (h - alg) / 8
    local key = KEYS[g]
    local str
    if flags >= 16 then -- flag bit 4: the key is an earlier request's
      flags = flags - 16
      str = redis.call('GET', key)
    elseif vals then
      str = vals[g]
    else
      str = redis.call('GET', key)
    end
    local a, b, c, rh
    a, b, c, str, rh = decode_counter(str, alg)
    if a == nil then
      if n == 1 then
        return BAD_REPLY
      end
      reply[g] = BAD_REPLY
    else
      local b0, b1, b2, b3, b4
      if flags >= 8 then -- flag bit 3: a calendar limit, its boundaries follow
        flags = flags - 8
        b0, b1, b2, b3, b4 = sunpack('<i8i8i8i8i8', blob, pos + REQ_LEN)
      end
      local cap, allowed, remaining, retry, reset, ttl, a2, b2_, c2
      local wait = 0
      if alg == 1 and flags % 4 < 2 and cost > 0 and cost <= z then
        -- A token bucket's charge within its capacity, no debt: its
        -- twin at once (decide_counter would hand it on unchanged, and a
        -- call of 15 arguments and 12 results costs more than the math).
        cap = z
        allowed, remaining, retry, reset, ttl, a2, b2_, c2 = token_bucket(x, y, z, a, b, c, now, cost, 0)
      elseif alg ~= 1 and flags % 4 < 2 and cost > 0 and cost <= (alg == 5 and z or x) then
        -- The same for the windows (capacity x) and the leaky bucket (z).
        cap = x
        if b0 ~= nil then -- a calendar limit (a window's)
          allowed, remaining, retry, reset, ttl, a2, b2_, c2 = calendar(alg, x, b0, b1, b2, b3, b4, a, b, c, now, cost, 0)
        elseif alg == 4 then
          allowed, remaining, retry, reset, ttl, a2, b2_, c2 = fixed_window(x, y, a, b, now, cost, 0)
        elseif alg == 2 then
          allowed, remaining, retry, reset, ttl, a2, b2_, c2 = sliding_window(x, y, a, b, c, now, cost, 0)
        else -- ALG_LEAKY_BUCKET; no-wait is flag bit 2
          cap = z
          allowed, remaining, retry, reset, ttl, a2, b2_, c2, wait = leaky_bucket(x, y, z, a, b, c, now, cost, flags % 8 >= 4, 0)
        end
      else
        cap, allowed, remaining, retry, reset, ttl, a2, b2_, c2, wait = decide_counter(alg, x, y, z, a, b, c, now, cost, flags, b0, b1, b2, b3, b4)
      end
      if allowed == 1 and cost ~= 0 and flags % 2 == 0 then
        write_counter(key, alg, a2, b2_, c2, ttl, keep, now, a, c, #str, rh)
      end
      local r = struct.pack(REPLY_FMT, allowed, cap, remaining, retry, reset, ttl, wait)
      if n == 1 then
        return r
      end
      reply[g] = r
    end
  end
  return table.concat(reply)
end
