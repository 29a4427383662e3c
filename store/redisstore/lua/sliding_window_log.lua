-- sliding_window_log.lua: the exact sliding window, mirroring
-- planSlidingLog and logPlan.apply in algorithms/slidinglog.go line by
-- line.
--
-- log_alg is its ALG function (lib.lua); the rest is its math and its
-- ring's codec.
--
-- sliding_window_log(requests, period_ms, s, now_ms, cost) -> s2, d
--   requests, period_ms  the limit
--   s       a log state (below); log_empty() for a key never seen
--   now_ms  Unix time in ms
--   cost    > 0 spends, 0 looks, < 0 refunds (already clamped by decide)
--   s2      the new state; s itself on a deny or when cost is 0
--   d       new_decision fields, durations in ms
--
-- The log is a ring of the times of the last admitted units, one slot a
-- unit, sorted oldest to newest from the head; see slidinglog.go. In Redis
-- it is one string:
--
--   header  LOG_HDR bytes: struct '<BI4I4I4i6': format (1), n (the number
--           of slots), head (the index of the oldest slot), low (how many
--           slots from the head are at or below the floor), floor -
--           STATE_EPOCH_MS (slots at or below the floor are gone)
--   slots   n slots of LOG_SLOT bytes: struct '<i6', the unit's Unix ms
--           - STATE_EPOCH_MS; LOG_EMPTY_REL for an empty slot
--
-- so a ring of n slots is 19 + 6n bytes: 60,019 for a full log of
-- MaxLogRequests (10,000) units. Times must lie within 2^47 ms (4,400
-- years) of STATE_EPOCH_MS.
--
-- A ring of at most LOG_WHOLE slots is read whole with the header (one
-- GETRANGE) and written whole (one SET). A larger state read from Redis
-- is not loaded whole: its slots are read with
-- GETRANGE, LOG_READ_BLOCK at a time and cached for the script call (a
-- decision reads O(log n) of them, and a key in steady use, whose oldest
-- live unit is near the low mark, one or two blocks), and what a
-- decision writes is kept as runs {from, k, v} (k slots from index from
-- on, wrapping, set to v) that log_write writes with SETRANGE. A state is
-- never changed: a decision returns a new one sharing the old runs. When the ring must grow or
-- shrink it is rebuilt as a string (base) and written whole with SET.
--
-- s = {key = the Redis key its slots are read from (nil if base is set or
--      n is 0), n = slots, head, low, floor, runs = {...}, base = packed
--      slots, cache = slots read from key, by index}: Go's State with
--      A = head, B = floor, C = low

-- new_decision is Go's Decision{Allowed: true, Limit: limit}, durations in
-- ms: retry (RetryAfter; -1 is Never), reset (ResetAfter), ttl (TTL).
local function new_decision(limit)
  return {allowed = 1, limit = limit, remaining = 0, retry = 0, reset = 0, ttl = 0}
end

local LOG_HDR, LOG_SLOT, LOG_MIN_SLOTS, LOG_READ_BLOCK = 19, 6, 8, 8
local LOG_EMPTY_REL = -140737488355328 -- -2^47: the packed empty slot
local LOG_EMPTY = -9007199254740992 -- the Go log's empty slot is below every time too
local LOG_MAX_REL = 140737488355328 -- 2^47

local function log_empty()
  return {n = 0, head = 0, low = 0, floor = 0, runs = {}}
end

-- log_enc packs one slot.
local function log_enc(v)
  if v == LOG_EMPTY then
    return struct.pack('<i6', LOG_EMPTY_REL)
  end
  local rel = v - STATE_EPOCH_MS
  if rel <= LOG_EMPTY_REL or rel >= LOG_MAX_REL then
    error('floodgate: time out of range for the sliding window log')
  end
  return struct.pack('<i6', rel)
end

-- log_dec unpacks the slot at byte pos of str.
local function log_dec(str, pos)
  local rel = struct.unpack('<i6', str, pos)
  if rel == LOG_EMPTY_REL then
    return LOG_EMPTY
  end
  return rel + STATE_EPOCH_MS
end

-- log_read is the slot at index p of the ring.
local function log_read(s, p)
  for r = #s.runs, 1, -1 do
    local run = s.runs[r]
    local d = p - run[1]
    if d < 0 then
      d = d + s.n
    end
    if d < run[2] then
      return run[3]
    end
  end
  if s.base ~= nil then
    return log_dec(s.base, p * LOG_SLOT + 1)
  end
  local v = s.cache[p]
  if v == nil then
    local last = math.min(p + LOG_READ_BLOCK, s.n) - 1
    local str = redis.call('GETRANGE', s.key, LOG_HDR + p * LOG_SLOT, LOG_HDR + (last + 1) * LOG_SLOT - 1)
    for i = p, last do
      s.cache[i] = log_dec(str, (i - p) * LOG_SLOT + 1)
    end
    v = s.cache[p]
  end
  return v
end

-- log_slot is Go's logSlot: the i-th oldest slot.
local function log_slot(s, i)
  local p = s.head + i
  if p >= s.n then
    p = p - s.n
  end
  return log_read(s, p)
end

-- log_with_run is s with k slots from index from on set to v.
local function log_with_run(s, from, k, v)
  local runs = {}
  for i, run in ipairs(s.runs) do
    runs[i] = run
  end
  runs[#runs + 1] = {from, k, v}
  return {key = s.key, n = s.n, head = s.head, low = s.low, floor = s.floor, runs = runs, base = s.base, cache = s.cache}
end

-- log_splice returns str (packed slots) with k slots from index p on (not
-- wrapping) set to v.
local function log_splice(str, p, k, v)
  return string.sub(str, 1, p * LOG_SLOT) .. string.rep(log_enc(v), k) .. string.sub(str, (p + k) * LOG_SLOT + 1)
end

-- log_bytes returns all the ring's packed slots, runs applied.
local function log_bytes(s)
  local str = s.base
  if str == nil then
    str = redis.call('GETRANGE', s.key, LOG_HDR, -1)
  end
  for _, run in ipairs(s.runs) do
    local first = math.min(run[2], s.n - run[1])
    str = log_splice(str, run[1], first, run[3])
    if run[2] > first then
      str = log_splice(str, 0, run[2] - first, run[3])
    end
  end
  return str
end

-- log_resize is Go's logPlan.resize: a new ring of size slots holding the live
-- units of s followed by cost units at at, empty slots first, its floor
-- at - w. Built with string operations, not a loop over the slots.
local function log_resize(s, live, size, cost, at, w)
  local kept = ''
  if live > 0 then
    local all = log_bytes(s)
    local p = s.head + s.n - live
    if p >= s.n then
      p = p - s.n
    end
    if p + live <= s.n then
      kept = string.sub(all, p * LOG_SLOT + 1, (p + live) * LOG_SLOT)
    else
      kept = string.sub(all, p * LOG_SLOT + 1) .. string.sub(all, 1, (p + live - s.n) * LOG_SLOT)
    end
  end
  local base = string.rep(log_enc(LOG_EMPTY), size - live - cost) .. kept .. string.rep(log_enc(at), cost)
  return {n = size, head = 0, low = size - live - cost, floor = at - w, runs = {}, base = base}
end

-- log_header packs the header of s.
local function log_header(s)
  return struct.pack('<BI4I4I4i6', 1, s.n, s.head, s.low, s.floor - STATE_EPOCH_MS)
end

-- log_load reads the log state at key; nil if it is malformed. Its one
-- GETRANGE takes the header and up to LOG_WHOLE slots: a ring that fits
-- (a key of a few units, the common case) is then held whole as base, so
-- the decision reads nothing more and log_write writes it with one SET
-- (two redis.call a decision instead of four to six); a larger ring is
-- read and written by the slot, as it was.
local LOG_WHOLE = 64
-- LOG_WHOLE_LAST is the last byte log_load reads, as a string made once
-- per library load: a number handed to redis.call is formatted on every
-- call.
local LOG_WHOLE_LAST = (LOG_HDR + LOG_WHOLE * LOG_SLOT - 1) .. ''

-- log_parse is log_load on h, the GETRANGE of key it made.
local function log_parse(key, h)
  if h == '' then
    return log_empty()
  end
  if #h < LOG_HDR then
    return nil
  end
  local format, n, head, low, floor = struct.unpack('<BI4I4I4i6', h)
  if format ~= 1 or n < 1 or head >= n or low > n then
    return nil
  end
  if #h == LOG_HDR + n * LOG_SLOT then
    return {n = n, head = head, low = low, floor = floor + STATE_EPOCH_MS, runs = {}, base = string.sub(h, LOG_HDR + 1)}
  end
  return {key = key, n = n, head = head, low = low, floor = floor + STATE_EPOCH_MS, runs = {}, cache = {}}
end

local function log_load(key)
  return log_parse(key, redis.call('GETRANGE', key, '0', LOG_WHOLE_LAST))
end

-- log_write writes s to key with a TTL of px ms (px_string's rounding up).
local function log_write(key, s, px)
  if s.base ~= nil then
    redis.call('SET', key, log_header(s) .. log_bytes(s), 'PX', px_string(px))
    return
  end
  for _, run in ipairs(s.runs) do
    local first = math.min(run[2], s.n - run[1])
    redis.call('SETRANGE', key, LOG_HDR + run[1] * LOG_SLOT, string.rep(log_enc(run[3]), first))
    if run[2] > first then
      redis.call('SETRANGE', key, LOG_HDR, string.rep(log_enc(run[3]), run[2] - first))
    end
  end
  redis.call('SETRANGE', key, 0, log_header(s))
  redis.call('PEXPIRE', key, px_string(px))
end

-- log_put writes s to key with a TTL of ttl + keep ms, or deletes key
-- when ttl is 0 (the state then equals no state).
local function log_put(key, s, ttl, keep)
  if ttl <= 0 then
    redis.call('DEL', key)
  else
    log_write(key, s, ttl + keep)
  end
end

-- log_first_live is the index of the first live slot (above cut) of a
-- ring of n slots, n if none: slots ascend from the head, and the first
-- lo are at or below the floor. It gallops from lo, then bisects;
-- slot(x, y, n, i) reads the ring's i-th oldest slot (log_slot_of's
-- and log_at's forms).
local function log_first_live(slot, x, y, n, lo, cut)
  local hi, step = n, 1
  while lo < n do
    local probe = lo + step - 1
    if probe > n - 1 then
      probe = n - 1
    end
    if slot(x, y, n, probe) > cut then
      hi = probe
      break
    end
    lo, step = probe + 1, step * 2
  end
  while lo < hi do
    local mid = lo + hi
    mid = (mid - mid % 2) / 2
    if slot(x, y, n, mid) > cut then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

-- log_slot_of is log_slot in log_first_live's form.
local function log_slot_of(s, _, _, i)
  return log_slot(s, i)
end

local function sliding_window_log(requests, period_ms, s, now, cost)
  local w = period_ms
  local n = s.n
  local at, cut, top = now, LOG_EMPTY, LOG_EMPTY
  if n > 0 then
    cut, top = s.floor, log_slot(s, n - 1)
    if top > cut then
      at = math.max(at, top) -- the clock went back: decide at the newest unit
    end
  end
  cut = math.max(cut, at - w)
  local lo = log_first_live(log_slot_of, s, nil, n, math.max(0, math.min(s.low, n)), cut)
  local d = new_decision(requests)
  local live0 = n - lo
  local live = live0
  local newest = top -- the newest live unit after the decision, if live > 0
  local writes = false
  local k = 0
  if cost > 0 and live + cost > requests then
    d.allowed = 0
    -- The need-th oldest live unit must leave.
    local need = live + cost - requests
    d.retry = log_slot(s, n - live + need - 1) + w - now
  elseif cost > 0 then
    live = live + cost
    newest = at
    writes = true
  elseif cost < 0 then
    k = math.min(-cost, live) -- refunds give back the newest live units
    live = live - k
    if live > 0 then
      newest = log_slot(s, n - 1 - k)
    end
    writes = true
  end
  d.remaining = math.max(0, requests - live)
  if live > 0 then
    d.reset = newest + w - now
  end
  d.ttl = d.reset
  if not writes then
    return s, d
  end
  -- logPlan.apply
  if cost > 0 then
    local after = live0 + cost
    local target = math.min(requests, math.max(LOG_MIN_SLOTS, 2 * after))
    if live0 == 0 or n - live0 < cost or n > 2 * target then
      return log_resize(s, live0, target, cost, at, w), d
    end
    local s2 = log_with_run(s, s.head, cost, at)
    s2.head, s2.floor, s2.low = (s.head + cost) % n, cut, n - after
    return s2, d
  end
  if live == 0 then
    return log_empty(), d -- nothing left: no state (its TTL is 0)
  end
  local head = (s.head - k + n) % n
  local s2 = log_with_run(s, head, k, LOG_EMPTY)
  s2.head, s2.floor, s2.low = head, cut, n - live
  return s2, d
end

-- LOG_EMPTY_SLOT is an empty slot packed: struct.pack('<i6',
-- LOG_EMPTY_REL), written out (struct is no global at library load).
local LOG_EMPTY_SLOT = '\0\0\0\0\0\128'

-- log_at is the i-th oldest slot of the whole ring str (log_load's
-- GETRANGE) of n slots from head, in log_first_live's form.
local function log_at(str, head, n, i)
  local p = head + i
  if p >= n then
    p = p - n
  end
  local rel = struct.unpack('<i6', str, LOG_HDR + p * LOG_SLOT + 1)
  if rel == LOG_EMPTY_REL then
    return LOG_EMPTY
  end
  return rel + STATE_EPOCH_MS
end

-- log_decide_whole is sliding_window_log and log_write for the common
-- request, straight on the string and without a table: it decides a cost
-- of 1..requests (no debt) on str, the GETRANGE of log_load, when str
-- holds no state or a whole ring, writes the new ring to key with a TTL
-- of its ttl + keep ms unless dry (remembered in undo, lib.lua, unless
-- nil), and returns allowed, remaining, retry, reset (also the ttl). It
-- returns nil, and decides and writes nothing, when str is a larger ring
-- or malformed: the caller then takes the general way (log_parse).
--
-- The steps and names are sliding_window_log's (s.n, s.head, s.low and
-- s.floor are n, head, low and floor), and the string written is
-- log_write's of the state sliding_window_log returns, byte for byte.
local function log_decide_whole(key, str, requests, w, cost, dry, now, keep, undo)
  local n, head, low, floor = 0, 0, 0, 0
  local at, cut, top = now, LOG_EMPTY, LOG_EMPTY
  if str ~= '' then
    local len = #str
    if len < LOG_HDR then
      return nil
    end
    local format
    format, n, head, low, floor = struct.unpack('<BI4I4I4i6', str)
    if format ~= 1 or n < 1 or head >= n or low > n or len ~= LOG_HDR + n * LOG_SLOT then
      return nil
    end
    cut = floor + STATE_EPOCH_MS
    top = log_at(str, head, n, n - 1)
    if top > cut and top > at then
      at = top -- the clock went back: decide at the newest unit
    end
  end
  if at - w > cut then
    cut = at - w
  end
  -- The first live slot; in steady use (no unit left since the last
  -- decision) the one at low, log_first_live's first probe.
  local lo = low
  if low < n and log_at(str, head, n, low) <= cut then
    lo = log_first_live(log_at, str, head, n, low + 1, cut)
  end
  local live0 = n - lo
  if live0 + cost > requests then
    -- Denied: the need-th oldest live unit must leave. Nothing is written.
    local retry = log_at(str, head, n, n - requests + cost - 1) + w - now
    local reset, remaining = 0, requests - live0
    if live0 > 0 then
      reset = top + w - now
    end
    if remaining < 0 then -- a ring kept from a larger limit
      remaining = 0
    end
    return 0, remaining, retry, reset
  end
  local after = live0 + cost
  local reset = at + w - now -- > 0: at >= now and w >= 1, so never a delete
  if not dry then
    local rel = at - STATE_EPOCH_MS
    if rel <= LOG_EMPTY_REL or rel >= LOG_MAX_REL then
      error('floodgate: time out of range for the sliding window log')
    end
    local v = struct.pack('<i6', rel)
    if cost > 1 then
      v = string.rep(v, cost)
    end
    local target = 2 * after
    if target < LOG_MIN_SLOTS then
      target = LOG_MIN_SLOTS
    end
    if target > requests then
      target = requests
    end
    local body
    if live0 == 0 or n - live0 < cost or n > 2 * target then
      -- log_resize: the live units, oldest first, after the empty slots.
      local kept = ''
      if live0 > 0 then
        local p = head + lo
        if p >= n then
          p = p - n
        end
        if p + live0 <= n then
          kept = string.sub(str, LOG_HDR + p * LOG_SLOT + 1, LOG_HDR + (p + live0) * LOG_SLOT)
        else
          kept = string.sub(str, LOG_HDR + p * LOG_SLOT + 1) .. string.sub(str, LOG_HDR + 1, LOG_HDR + (p + live0 - n) * LOG_SLOT)
        end
      end
      n, head, low, floor = target, 0, target - after, at - w
      body = string.rep(LOG_EMPTY_SLOT, low) .. kept .. v
    else
      -- The cost oldest slots, from the head, are dead: they take at.
      local first = n - head
      if cost <= first then
        body = string.sub(str, LOG_HDR + 1, LOG_HDR + head * LOG_SLOT) .. v .. string.sub(str, LOG_HDR + (head + cost) * LOG_SLOT + 1)
      else
        local wrap = (cost - first) * LOG_SLOT
        body = string.sub(v, 1, wrap) .. string.sub(str, LOG_HDR + wrap + 1, LOG_HDR + head * LOG_SLOT) .. string.sub(v, wrap + 1)
      end
      head = head + cost
      if head >= n then
        head = head - n
      end
      low, floor = n - after, cut
    end
    if undo then
      remember(undo, key, str ~= '' and str, false)
    end
    redis.call('SET', key, struct.pack('<BI4I4I4i6', 1, n, head, low, floor - STATE_EPOCH_MS) .. body, 'PX', px_string(reset + keep))
  end
  return 1, requests - after, 0, reset
end

-- log_alg is the log's ALG function (lib.lua): requests and period_ms
-- are x and y. A debt records what the free slots hold, never owes: the
-- rest of its cost is unrecorded.
local function log_alg(key, requests, period_ms, _, cost, flags, now, keep, undo)
  local str = redis.call('GETRANGE', key, '0', LOG_WHOLE_LAST)
  local dry = flags % 2 == 1
  if cost > 0 and cost <= requests and flags % 4 < 2 then
    local allowed, remaining, retry, reset = log_decide_whole(key, str, requests, period_ms, cost, dry, now, keep, undo)
    if allowed ~= nil then
      return allowed, remaining, retry, reset, reset, 0, 0, 0
    end
  end
  local s = log_parse(key, str)
  if s == nil then
    return nil
  end
  local unrecorded, never = 0, false
  if flags % 4 >= 2 and cost > 0 then -- debt (flag bit 1)
    local _, d0 = sliding_window_log(requests, period_ms, s, now, 0)
    if d0.remaining < cost then
      unrecorded, cost = cost - d0.remaining, d0.remaining
    end
  end
  if cost > requests then
    cost, never = 0, true
  elseif cost < -requests then
    cost = -requests
  end
  local s2, d = sliding_window_log(requests, period_ms, s, now, cost)
  if never then
    return 0, d.remaining, -1, d.reset, d.ttl, 0, 0, 0
  end
  if not dry and d.allowed == 1 and cost ~= 0 then
    if undo then
      local old = str
      if s.key ~= nil then -- a ring larger than the GETRANGE read
        old = redis.call('GET', key)
      end
      remember(undo, key, old ~= '' and old, cost < 0 or d.ttl <= 0)
    end
    log_put(key, s2, d.ttl, keep)
  end
  return d.allowed, d.remaining, d.retry, d.reset, d.ttl, 0, unrecorded, 0
end

ALG[ALG_SLIDING_WINDOW_LOG] = log_alg
