-- batch.lua: decides N requests in one call, all or nothing. The script
-- Redis runs is lib.lua, the four algorithm files and this driver, joined
-- (algorithms.BatchScript); it mirrors a store.Store Decide call made of
-- algorithms.DecideMs calls.
--
-- KEYS[i]  the state key of request i. All keys must hash to one slot; a
--          key may repeat (it then sees the earlier requests' charges).
--          A key holds one algorithm's state, a string: pack_state in
--          lib.lua for the token bucket, sliding window and fixed window,
--          a ring of unit times for the sliding window log (see
--          sliding_window_log.lua).
-- ARGV[1]  now_ms: Unix time in ms, >= 0; empty or negative means use
--          Redis' TIME (sec * 1000 + floor(usec / 1000)), the default in
--          production.
-- ARGV[2]  keep_ms: ms added to every TTL written (0 in production; tests
--          whose now does not follow the wall clock keep keys longer).
-- ARGV[3]  write: 1 writes the new states unless a request is denied; 0
--          probes: decides the same way but never writes.
-- then six values per request i, at ARGV[4 + 6 * (i - 1)]:
--          algorithm   1 token_bucket, 2 sliding_window,
--                      3 sliding_window_log, 4 fixed_window
--          requests    requests per period (> 0)
--          period_ms   the period in ms (> 0)
--          burst       token bucket capacity; 0 means requests
--          cost        > 0 spends, 0 looks, < 0 refunds
--          flags       bit 0 (1): dry run, decide as if charging but
--                      never write; bit 1 (2): this request starts a new
--                      group (ignored on the first request)
--
-- Reply: six integers per request, flat, in request order:
--          allowed (0 or 1), limit, remaining, retry_after_ms (-1: never),
--          reset_after_ms, ttl_ms
-- decoded by algorithms.DecodeBatchReply.
--
-- The requests form groups (one group unless a request's flags start a
-- new one): each group is one store.Store Decide call, all or nothing on
-- its own, and the groups run one after another, each seeing the groups
-- before it. The Redis store puts concurrent Decide calls of one slot in
-- one script call this way, saving Redis a script call per decision.
--
-- Phase 1 decides every request in order on a working copy of the states
-- (decide mirrors algorithms.DecideMs); at the end of a group its changes
-- are kept if no request of the group with a positive cost was denied,
-- else dropped. Phase 2 runs only if write is 1: it writes each state kept
-- changed with its last TTL (PX), or deletes it when that TTL is 0 (the
-- state equals no state). A denied group writes nothing. A sliding window
-- log is read slot by slot in phase 1 and written in phase 2 as the runs
-- of slots it changed (SETRANGE): neither phase reads or writes the
-- whole log, except to grow or shrink its ring.

if redis.replicate_commands ~= nil then
  redis.replicate_commands() -- effects replication, needed for TIME before Redis 5
end

-- decide mirrors algorithms.DecideMs.
local function decide(alg, requests, period_ms, burst, s, now, cost)
  local c = capacity_of(alg, requests, burst)
  if cost > c then
    local _, d = decide(alg, requests, period_ms, burst, s, now, 0)
    d.allowed, d.retry = 0, -1
    return s, d
  elseif cost < -c then
    cost = -c
  end
  if alg == ALG_TOKEN_BUCKET then
    return token_bucket(requests, period_ms, burst, s, now, cost)
  elseif alg == ALG_SLIDING_WINDOW then
    return sliding_window(requests, period_ms, s, now, cost)
  elseif alg == ALG_SLIDING_WINDOW_LOG then
    return sliding_window_log(requests, period_ms, s, now, cost)
  end
  return fixed_window(requests, period_ms, s, now, cost)
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
  local v = redis.call('GET', key)
  if v == false then
    return {a = 0, b = 0, c = 0}
  end
  local s = unpack_state(v)
  if s == nil then
    return nil, 'malformed state'
  end
  -- Times are stored relative to STATE_EPOCH_MS (see lib.lua).
  if alg == ALG_TOKEN_BUCKET then
    s.b = s.b + STATE_EPOCH_MS
  else
    s.a = s.a + STATE_EPOCH_MS
  end
  return s
end

-- int reads ARGV[i] as an integer at least min; nil if it is not one.
local function int(i, min)
  local v = tonumber(ARGV[i])
  if v == nil or v ~= math.floor(v) or v < min then
    return nil
  end
  return v
end

local n = #KEYS
if #ARGV ~= 3 + 6 * n then
  return redis.error_reply('ERR floodgate: want 3 + 6 ARGV per key, got ' .. #ARGV .. ' for ' .. n .. ' keys')
end
local now = tonumber(ARGV[1])
if now == nil or now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local keep, write = int(2, 0), int(3, 0)
if keep == nil then
  return redis.error_reply('ERR floodgate: bad keep_ms')
end
if write == nil or write > 1 then
  return redis.error_reply('ERR floodgate: bad write flag')
end

local work, order, reply = {}, {}, {}
local denied = false
local group = {} -- the keys the current group touched
-- finish ends the current group: keep its changes unless it was denied.
local function finish()
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
    w.group = nil
  end
  group, denied = {}, false
end
for i = 1, n do
  local base = 3 + 6 * (i - 1)
  local alg, requests, period_ms = int(base + 1, 1), int(base + 2, 1), int(base + 3, 1)
  local burst, cost, flags = int(base + 4, 0), int(base + 5, -math.huge), int(base + 6, 0)
  if alg == nil or alg > 4 or requests == nil or period_ms == nil or burst == nil or cost == nil or flags == nil or flags > 3 then
    return redis.error_reply('ERR floodgate: bad arguments for request ' .. i)
  end
  local dry = flags % 2
  if flags >= 2 and i > 1 then
    finish()
  end
  local key = KEYS[i]
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
  if not w.group then
    w.group = true
    group[#group + 1] = key
  end
  local s2, d = decide(alg, requests, period_ms, burst, w.state, now, cost)
  if cost > 0 and d.allowed == 0 then
    denied = true
  end
  if dry == 0 and d.allowed == 1 and cost ~= 0 then
    w.state, w.changed, w.ttl = s2, true, d.ttl
  end
  local r = #reply
  reply[r + 1], reply[r + 2], reply[r + 3] = d.allowed, d.limit, d.remaining
  reply[r + 4], reply[r + 5], reply[r + 6] = d.retry, d.reset, d.ttl
end
finish()

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
        local a, b = s.a, s.b
        if w.alg == ALG_TOKEN_BUCKET then
          b = b - STATE_EPOCH_MS
        else
          a = a - STATE_EPOCH_MS
        end
        redis.call('SET', key, pack_state(a, b, s.c), 'PX', itoa(w.kttl + keep))
      end
    end
  end
end
return reply
