-- lean.lua: the driver of the counters script, for calls whose requests
-- all use the token bucket, the sliding window or the fixed window (a
-- call with a sliding window log goes to batch.lua's script). It decides
-- N requests in one call, all or nothing per group, and mirrors a
-- sequence of store.Store Decide calls made of algorithms.DecideMs calls.
--
-- KEYS[i]  the state key of request i. All keys must hash to one slot; a
--          key may repeat (it then sees the earlier requests' charges).
--          A key holds pack_state's string (lib.lua).
-- ARGV[g]  group g: the requests of one Decide call, REQ_LEN bytes each
--          (lib.lua), in KEYS order; ARGV[1] starts with the call's
--          HDR_LEN-byte header. Each group is decided all or nothing on
--          its own, after the groups before it, as if it were a separate
--          call: the Redis store so puts concurrent Decide calls of one
--          slot in one script call.
--
-- Reply: one string, REPLY_FMT (lib.lua) per request, in request order.
--
-- A group's changes are kept if no request of it with a positive cost
-- was denied, else dropped. If write is 1, each state kept changed is
-- written at the end with its last TTL (SET ... PX), or deleted when that
-- TTL is 0 (the state equals no state); a denied group writes nothing.
--
-- One request (the common call) takes a path of its own that needs no
-- table but the reply's; the general path keeps the working states of
-- all the call's keys in one flat table, W_FIELDS numbers a key.
--
-- This file is a script's body (EVAL) and, in the function library, the
-- body of function(KEYS, ARGV) (script.go): it reads KEYS and ARGV only
-- as those names and passes ARGV on.

if redis.replicate_commands ~= nil then
  redis.replicate_commands() -- effects replication, needed for TIME before Redis 5
end

local n = #KEYS
local hdr = ARGV[1]
local now, keep, write, read, readb, off = read_header(ARGV[1] or '')
if now == nil or keep < 0 or write < 0 or write > 1 then
  return redis.error_reply('ERR floodgate: bad header')
end
if now < 0 then
  local t = redis.call('TIME') -- sec * 1000 + floor(usec / 1000)
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The one-request call.
if n == 1 and #ARGV == 1 and #hdr > HDR_LEN and #hdr == HDR_LEN + req_len(string.byte(hdr, HDR_LEN + 1), off) then
  local alg, flags, requests, period_ms, burst, cost = read(hdr, HDR_LEN + 1)
  local cal = flags ~= nil and flags % 16 >= 8 -- flag bit 3: a calendar limit
  if cal then
    flags = flags - 8
  end
  if alg == nil or alg < 1 or alg > 5 or alg == 3 or flags > 7 or requests < 1 or period_ms < 1 or burst < 0 or (cal and alg ~= 2 and alg ~= 4) then
    return redis.error_reply('ERR floodgate: bad arguments for request 1')
  end
  local key = KEYS[1]
  local a, b, c = load_counter(key, alg)
  if a == nil then
    return redis.error_reply('ERR floodgate: malformed state at key ' .. key)
  end
  local cap, allowed, remaining, retry, reset, ttl, a2, b2, c2, wait
  if cal then
    local b0, b1, b2_, b3, b4 = readb(hdr, HDR_LEN + REQ_LEN + 1)
    if b0 == nil or not (b0 < b1 and b1 < b2_ and b2_ < b3 and b3 < b4) then
      return redis.error_reply('ERR floodgate: bad arguments for request 1')
    end
    cap, allowed, remaining, retry, reset, ttl, a2, b2, c2, wait = decide_calendar(alg, requests, b0, b1, b2_, b3, b4, a, b, c, now, cost, flags)
  else
    cap, allowed, remaining, retry, reset, ttl, a2, b2, c2, wait = decide_counter(alg, requests, period_ms, burst, a, b, c, now, cost, flags)
  end
  if write == 1 and flags % 2 == 0 and allowed == 1 and cost ~= 0 then
    write_counter(key, alg, a2, b2, c2, ttl, keep)
  end
  return struct.pack(REPLY_FMT, allowed, cap, remaining, retry, reset, ttl, wait)
end

-- The general path. Check the shape before anything is read.
local bad = check_groups(ARGV, n, off)
if bad then
  return bad
end

-- W holds, per distinct key from base j (slot[key]): the algorithm, the
-- working state (a, b, c, changed, ttl), the kept state (the same five as
-- of the last group that was not denied), the group that last touched it
-- and the key.
local W_ALG, W_A, W_B, W_C, W_CH, W_TTL, W_KA, W_KB, W_KC, W_KCH, W_KTTL, W_GROUP, W_KEY = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
local W_FIELDS = 13
local slot, W, nw = {}, {}, 0
local touched = {}
local reply = {}
local r = 0
for g = 1, #ARGV do
  local blob = ARGV[g]
  local pos, len = 1, #blob
  if g == 1 then
    pos = HDR_LEN + 1
  end
  local denied, nt = false, 0
  while pos <= len do
    r = r + 1
    local alg, flags, requests, period_ms, burst, cost = read(blob, pos)
    local cal, b0, b1, b2, b3, b4 = flags ~= nil and flags % 16 >= 8, 0, 0, 0, 0, 0
    if cal then -- flag bit 3: a calendar limit, its boundaries follow
      flags = flags - 8
      b0, b1, b2, b3, b4 = readb(blob, pos + REQ_LEN)
      pos = pos + CAL_LEN
    end
    pos = pos + REQ_LEN
    if alg == nil or alg < 1 or alg > 5 or alg == 3 or flags > 7 or requests < 1 or period_ms < 1 or burst < 0 or (cal and ((alg ~= 2 and alg ~= 4) or b0 == nil or not (b0 < b1 and b1 < b2 and b2 < b3 and b3 < b4))) then
      return redis.error_reply('ERR floodgate: bad arguments for request ' .. r)
    end
    local key = KEYS[r]
    local j = slot[key]
    if j == nil then
      local a, b, c = load_counter(key, alg)
      if a == nil then
        return redis.error_reply('ERR floodgate: malformed state at key ' .. key)
      end
      j = nw
      nw = nw + W_FIELDS
      slot[key] = j
      W[j + W_ALG], W[j + W_A], W[j + W_B], W[j + W_C], W[j + W_CH], W[j + W_TTL] = alg, a, b, c, 0, 0
      W[j + W_KA], W[j + W_KB], W[j + W_KC], W[j + W_KCH], W[j + W_KTTL] = a, b, c, 0, 0
      W[j + W_GROUP], W[j + W_KEY] = 0, key
    elseif W[j + W_ALG] ~= alg then
      return redis.error_reply('ERR floodgate: key ' .. key .. ' used with two algorithms')
    end
    if W[j + W_GROUP] ~= g then
      W[j + W_GROUP] = g
      nt = nt + 1
      touched[nt] = j
    end
    local cap, allowed, remaining, retry, reset, ttl, a2, b2_, c2, wait
    if cal then
      cap, allowed, remaining, retry, reset, ttl, a2, b2_, c2, wait = decide_calendar(alg, requests, b0, b1, b2, b3, b4, W[j + W_A], W[j + W_B], W[j + W_C], now, cost, flags)
    else
      cap, allowed, remaining, retry, reset, ttl, a2, b2_, c2, wait = decide_counter(alg, requests, period_ms, burst, W[j + W_A], W[j + W_B], W[j + W_C], now, cost, flags)
    end
    if cost > 0 and allowed == 0 then
      denied = true
    end
    if flags % 2 == 0 and allowed == 1 and cost ~= 0 then
      W[j + W_A], W[j + W_B], W[j + W_C], W[j + W_CH], W[j + W_TTL] = a2, b2_, c2, 1, ttl
    end
    reply[r] = struct.pack(REPLY_FMT, allowed, cap, remaining, retry, reset, ttl, wait)
  end
  -- The group ends: keep its changes unless it was denied.
  for t = 1, nt do
    local j = touched[t]
    if denied then
      W[j + W_A], W[j + W_B], W[j + W_C], W[j + W_CH], W[j + W_TTL] = W[j + W_KA], W[j + W_KB], W[j + W_KC], W[j + W_KCH], W[j + W_KTTL]
    else
      if W[j + W_CH] == 1 and W[j + W_TTL] <= 0 then
        -- Kept with a TTL of 0: the state is deleted, so the groups after
        -- see no state, as separate Decide calls would.
        W[j + W_A], W[j + W_B], W[j + W_C] = 0, 0, 0
      end
      W[j + W_KA], W[j + W_KB], W[j + W_KC], W[j + W_KCH], W[j + W_KTTL] = W[j + W_A], W[j + W_B], W[j + W_C], W[j + W_CH], W[j + W_TTL]
    end
  end
end

if write == 1 then
  for j = 0, nw - W_FIELDS, W_FIELDS do
    if W[j + W_KCH] == 1 then
      write_counter(W[j + W_KEY], W[j + W_ALG], W[j + W_KA], W[j + W_KB], W[j + W_KC], W[j + W_KTTL], keep)
    end
  end
end
return table.concat(reply)
