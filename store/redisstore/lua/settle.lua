-- settle.lua: the driver of the settle script (store.Settler): usage known
-- only afterwards, charged as debt or refunded, once per idempotency key.
-- It mirrors memstore's Settle, built on algorithms.Settle.
--
-- KEYS[1]  the state key; KEYS[2] the settlement record's key, in the same
--          hash slot (keys.RedisSettle).
-- ARGV[1]  the header (lib.lua) and one request whose cost is the delta,
--          actual - reserved (flags 2: debt, or 10: debt on a calendar
--          limit, its boundaries following; lib.lua).
-- ARGV[2]  the settlement's fingerprint (its numbers).
-- ARGV[3]  how long the record is kept, in ms (> 0).
--
-- If KEYS[2] holds ARGV[2], the settlement is a retry: nothing is charged
-- and the reply is the key's numbers now (duplicate 1). If it holds
-- anything else, the idempotency key was used with other numbers: the
-- error 'ERR floodgate: settle conflict'. Otherwise the delta is charged
-- (debt when positive, a refund when negative) and the record is set
-- with its TTL in the same script call: atomic with the charge, so a
-- retry after a lost reply finds it.
--
-- Reply: one string, struct '<Bi8i8i8i8i8i8i8B': allowed (1), limit,
-- remaining, retry_after_ms (until a check of cost 1 passes), reset_after_ms,
-- ttl_ms, debt, unrecorded, duplicate (0 or 1).
--
-- A function of the library beside decide.lua's (script.go).

local function settle(KEYS, ARGV)
  local now, keep, write = read_header(ARGV[1] or '')
  if #KEYS ~= 2 or #ARGV ~= 3 or now == nil or keep < 0 or write ~= 1 or #ARGV[1] <= HDR_LEN or #ARGV[1] ~= HDR_LEN + req_len(string.byte(ARGV[1], HDR_LEN + 1)) then
    return redis.error_reply('ERR floodgate: bad settle arguments')
  end
  local record_ms = tonumber(ARGV[3])
  local alg, flags, requests, period_ms, burst, cost = read_request(ARGV[1], HDR_LEN + 1)
  local b0, b1, b2, b3, b4
  if flags == 10 then -- a calendar limit (flag bit 3): its boundaries follow
    b0, b1, b2, b3, b4 = read_bounds(ARGV[1], HDR_LEN + REQ_LEN + 1)
    if b0 == nil or (alg ~= 2 and alg ~= 4) or not (b0 < b1 and b1 < b2 and b2 < b3 and b3 < b4) then
      return redis.error_reply('ERR floodgate: bad settle arguments')
    end
    flags = 2
  end
  if record_ms == nil or record_ms < 1 or alg == nil or alg < 1 or alg > 5 or flags ~= 2 or requests < 1 or period_ms < 1 or burst < 0 then
    return redis.error_reply('ERR floodgate: bad settle arguments')
  end
  if now < 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end

  local dup = 0
  local rec = redis.call('GET', KEYS[2])
  if rec ~= false then
    if rec ~= ARGV[2] then
      return redis.error_reply('ERR floodgate: settle conflict')
    end
    dup, cost = 1, 0
  end

  local key = KEYS[1]
  local cap, remaining, reset, ttl, unrecorded, owed, retry
  if alg == ALG_SLIDING_WINDOW_LOG then
    local s = log_load(key)
    if s == nil then
      return redis.error_reply('ERR floodgate: malformed state at key ' .. key)
    end
    if cost < -requests then
      cost = -requests
    end
    unrecorded, owed = 0, 0
    if cost > 0 then -- the log records what its free slots hold, never owes
      local _, d0 = sliding_window_log(requests, period_ms, s, now, 0)
      if d0.remaining < cost then
        unrecorded = cost - d0.remaining
        cost = d0.remaining
      end
    end
    local s2, d = sliding_window_log(requests, period_ms, s, now, cost)
    cap, remaining, reset, ttl = d.limit, d.remaining, d.reset, d.ttl
    local _, d1 = sliding_window_log(requests, period_ms, s2, now, 1)
    retry = d1.retry
    if cost ~= 0 then
      log_put(key, s2, ttl, keep)
    end
  else
    local a, b, c, str, rh = load_counter(key, alg)
    if a == nil then
      return redis.error_reply('ERR floodgate: malformed state at key ' .. key)
    end
    local allowed, a2, b2_, c2, retry1, _
    cap, allowed, remaining, retry, reset, ttl, a2, b2_, c2, _, unrecorded, owed = decide_counter(alg, requests, period_ms, burst, a, b, c, now, cost, 2, b0, b1, b2, b3, b4)
    _, _, _, retry1 = decide_counter(alg, requests, period_ms, burst, a2, b2_, c2, now, 1, 0, b0, b1, b2, b3, b4)
    retry = retry1
    if cost ~= 0 then
      write_counter(key, alg, a2, b2_, c2, ttl, keep, now, a, c, #str, rh)
    end
  end
  if dup == 0 then
    redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  end
  return struct.pack('<Bi8i8i8i8i8i8i8B', 1, cap, remaining, retry, reset, ttl, owed, unrecorded, dup)
end
