-- lean.lua: the driver of the counters script, for calls whose requests
-- all use the token bucket, the sliding window, the fixed window or the
-- leaky bucket, calendar quotas included (a call with a sliding window log
-- goes to batch.lua's script). It decides
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
-- A call whose groups are one request each (the common call) takes a
-- direct path that decides and writes each in turn and needs no table but
-- the reply's; the general path keeps the working states of all the
-- call's keys in one flat table, W_FIELDS numbers a key.
--
-- This file is a script's body (EVAL) and, in the function library, the
-- body of function(KEYS, ARGV) (script.go): it reads KEYS and ARGV only
-- as those names and passes ARGV on.

local n = #KEYS
local now, keep, write, read, readb = read_header(ARGV[1] or '')
if now == nil or keep < 0 or write < 0 or write > 1 then
  return redis.error_reply('ERR floodgate: bad header')
end
if now < 0 then
  -- sec * 1000 + floor(usec / 1000); Lua turns TIME's strings into
  -- numbers in the arithmetic itself, which costs less than tonumber.
  local t = redis.call('TIME')
  local us = t[2]
  now = t[1] * 1000 + (us - us % 1000) / 1000
end

-- The direct path: every group is one request and the call writes (the
-- common call: a lone Decide of one request, or the batcher's merge of
-- such calls). Each request is then decided and written on its own, in
-- order, so a key repeated in a later group sees the earlier one's write,
-- as separate calls would; no table but the reply's. The lengths are
-- checked before anything is written, each request's values before its
-- own write: a malformed request (the store never sends one) is refused,
-- and the groups before it, separate calls, stand.
local direct = write == 1 and #ARGV == n
if direct then
  for g = 1, n do
    local len = #ARGV[g]
    if g == 1 then
      len = len - HDR_LEN
    end
    if len ~= REQ_LEN and len ~= REQ_LEN + CAL_LEN then
      direct = false
      break
    end
  end
end
if direct then
  local unpack, pack = struct.unpack, struct.pack
  local reply
  if n > 1 then
    reply = {}
  end
  for g = 1, n do
    local blob, pos = ARGV[g], 1
    if g == 1 then
      pos = HDR_LEN + 1
    end
    local h, requests, period_ms, burst, cost = unpack('<Bi8i8i8i8', blob, pos)
    local alg = h % 8
    local flags = (h - alg) / 8
    local cal = #blob - pos + 1 ~= REQ_LEN
    if flags < 16 and (flags >= 8) ~= cal then
      return redis.error_reply('ERR floodgate: want ' .. REQ_LEN .. ' bytes per request (' .. (REQ_LEN + CAL_LEN) .. ' for a calendar one) in every group')
    end
    if flags >= 16 or requests < 1 or period_ms < 1 or burst < 0 or alg == 0 or alg == 3 or alg > 5 then
      return redis.error_reply('ERR floodgate: bad arguments for request ' .. g)
    end
    local key = KEYS[g]
    local a, b, c = load_counter(key, alg)
    if a == nil then
      return redis.error_reply('ERR floodgate: malformed state at key ' .. key)
    end
    local cap, allowed, remaining, retry, reset, ttl, a2, b2, c2, wait
    if cal then
      local b0, b1, b2_, b3, b4 = unpack('<i8i8i8i8i8', blob, pos + REQ_LEN)
      if not (b0 < b1 and b1 < b2_ and b2_ < b3 and b3 < b4) or (alg ~= 2 and alg ~= 4) then
        return redis.error_reply('ERR floodgate: bad arguments for request ' .. g)
      end
      cap, allowed, remaining, retry, reset, ttl, a2, b2, c2, wait = decide_calendar(alg, requests, b0, b1, b2_, b3, b4, a, b, c, now, cost, flags - 8)
    else
      -- decide_counter written out: the limit's capacity, the debt flag,
      -- a cost beyond the capacity decided as a look, then the algorithm.
      cap = requests
      if burst > 0 and (alg == 1 or alg == 5) then
        cap = burst
      end
      local debt = 0
      if flags % 4 >= 2 then
        debt = 1
      end
      local never = false
      if cost > cap and debt ~= 1 then
        cost, never = 0, true
      elseif cost < -cap then
        cost = -cap
      end
      wait = 0
      if alg == 1 then -- ALG_TOKEN_BUCKET
        allowed, remaining, retry, reset, ttl, a2, b2, c2 = token_bucket(requests, period_ms, burst, a, b, c, now, cost, debt)
      elseif alg == 2 then -- ALG_SLIDING_WINDOW
        allowed, remaining, retry, reset, ttl, a2, b2, c2 = sliding_window(requests, period_ms, a, b, c, now, cost, debt)
      elseif alg == 4 then -- ALG_FIXED_WINDOW
        allowed, remaining, retry, reset, ttl, a2, b2, c2 = fixed_window(requests, period_ms, a, b, now, cost, debt)
      else -- ALG_LEAKY_BUCKET; no-wait is flag bit 2
        allowed, remaining, retry, reset, ttl, a2, b2, c2, wait = leaky_bucket(requests, period_ms, burst, a, b, c, now, cost, flags % 8 >= 4, debt)
      end
      if never then
        allowed, retry, wait = 0, -1, 0
      end
    end
    if allowed == 1 and cost ~= 0 and flags % 2 == 0 then
      write_counter(key, alg, a2, b2, c2, ttl, keep)
    end
    if n == 1 then
      return pack('<Bi8i8i8i8i8i8', allowed, cap, remaining, retry, reset, ttl, wait)
    end
    reply[g] = pack('<Bi8i8i8i8i8i8', allowed, cap, remaining, retry, reset, ttl, wait)
  end
  return table.concat(reply)
end

-- The general path. Check the shape before anything is read.
local bad = check_groups(ARGV, n)
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
