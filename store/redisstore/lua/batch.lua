-- batch.lua: the driver of the full script, for calls that hold a
-- sliding window log (calls without one go to lean.lua's script, which
-- decides the same way with less work). It decides N requests in one
-- call, all or nothing per group; KEYS, ARGV, groups and the reply are
-- those of lean.lua, with algorithm 3 (sliding_window_log) allowed. A
-- sliding window log key holds a ring of unit times (see
-- sliding_window_log.lua); the other keys pack_state's string (lib.lua).
--
-- Phase 1 decides every request in order on a working copy of the states;
-- at the end of a group its changes are kept if no request of the group
-- with a positive cost was denied, else dropped. Phase 2 runs only if
-- write is 1: it writes each state kept changed with its last TTL (PX),
-- or deletes it when that TTL is 0 (the state equals no state). A denied
-- group writes nothing. A sliding window log is read slot by slot in
-- phase 1 and written in phase 2 as the runs of slots it changed
-- (SETRANGE): neither phase reads or writes the whole log, except to grow
-- or shrink its ring.
--
-- Like lean.lua, a script's body and a library function's (script.go).


-- decide mirrors algorithms.DecideMode on a state table: the new state
-- (s itself when unchanged) and the decision's fields. flags are the
-- request's flags (bit 1: debt, bit 2: no-wait); b0..b4 are a calendar
-- limit's boundaries (lib.lua), b0 nil for others.
local function decide(alg, requests, period_ms, burst, s, now, cost, flags, b0, b1, b2, b3, b4)
  if alg ~= ALG_SLIDING_WINDOW_LOG then
    local cap, allowed, remaining, retry, reset, ttl, sa, sb, sc, wait
    if b0 ~= nil then
      cap, allowed, remaining, retry, reset, ttl, sa, sb, sc, wait = decide_calendar(alg, requests, b0, b1, b2, b3, b4, s.a, s.b, s.c, now, cost, flags)
    else
      cap, allowed, remaining, retry, reset, ttl, sa, sb, sc, wait = decide_counter(alg, requests, period_ms, burst, s.a, s.b, s.c, now, cost, flags)
    end
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

-- load reads key's state for alg; nil and a message if it is malformed.
local function load(key, alg)
  if alg == ALG_SLIDING_WINDOW_LOG then
    local s = log_load(key)
    if s == nil then
      return nil, 'malformed state'
    end
    return s
  end
  local a, b, c = load_counter(key, alg)
  if a == nil then
    return nil, 'malformed state'
  end
  return {a = a, b = b, c = c}
end

local n = #KEYS
local now, keep, write, read, readb = read_header(ARGV[1] or '')
if now == nil or keep < 0 or write < 0 or write > 1 then
  return redis.error_reply('ERR floodgate: bad header')
end
local bad = check_groups(ARGV, n)
if bad then
  return bad
end
if now < 0 then
  local t = redis.call('TIME') -- sec * 1000 + floor(usec / 1000)
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local work, order, reply = {}, {}, {}
local r = 0
for g = 1, #ARGV do
  local blob = ARGV[g]
  local pos, len = 1, #blob
  if g == 1 then
    pos = HDR_LEN + 1
  end
  local denied = false
  local group = {} -- the keys this group touched
  while pos <= len do
    r = r + 1
    local alg, flags, requests, period_ms, burst, cost = read(blob, pos)
    local cal, b0, b1, b2, b3, b4 = flags ~= nil and flags % 16 >= 8, nil, 0, 0, 0, 0
    if cal then -- flag bit 3: a calendar limit, its boundaries follow
      flags = flags - 8
      b0, b1, b2, b3, b4 = readb(blob, pos + REQ_LEN)
      pos = pos + CAL_LEN
    end
    pos = pos + REQ_LEN
    if alg == nil or alg < 1 or alg > 5 or flags > 7 or requests < 1 or period_ms < 1 or burst < 0 or (cal and ((alg ~= 2 and alg ~= 4) or b0 == nil or not (b0 < b1 and b1 < b2 and b2 < b3 and b3 < b4))) then
      return redis.error_reply('ERR floodgate: bad arguments for request ' .. r)
    end
    local key = KEYS[r]
    local w = work[key]
    if w == nil then
      local s, err = load(key, alg)
      if s == nil then
        return redis.error_reply('ERR floodgate: ' .. err .. ' at key ' .. key)
      end
      w = {alg = alg, state = s, changed = false, ttl = 0, kstate = s, kchanged = false, kttl = 0}
      work[key] = w
      order[#order + 1] = key
    elseif w.alg ~= alg then
      return redis.error_reply('ERR floodgate: key ' .. key .. ' used with two algorithms')
    end
    if w.group ~= g then
      w.group = g
      group[#group + 1] = key
    end
    local s2, allowed, cap, remaining, retry, reset, ttl, wait = decide(alg, requests, period_ms, burst, w.state, now, cost, flags, b0, b1, b2, b3, b4)
    if cost > 0 and allowed == 0 then
      denied = true
    end
    if flags % 2 == 0 and allowed == 1 and cost ~= 0 then
      w.state, w.changed, w.ttl = s2, true, ttl
    end
    reply[r] = struct.pack(REPLY_FMT, allowed, cap, remaining, retry, reset, ttl, wait)
  end
  -- The group ends: keep its changes unless it was denied.
  for _, key in ipairs(group) do
    local w = work[key]
    if denied then
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

if write == 1 then
  for _, key in ipairs(order) do
    local w = work[key]
    if w.kchanged then
      local s = w.kstate
      if w.kttl <= 0 then
        redis.call('DEL', key)
      elseif w.alg == ALG_SLIDING_WINDOW_LOG then
        log_write(key, s, w.kttl + keep)
      else
        write_counter(key, w.alg, s.a, s.b, s.c, w.kttl, keep)
      end
    end
  end
end
return table.concat(reply)
