-- settle.lua: the settle function (store.Settler): usage known only
-- afterwards, charged as debt or refunded, once per idempotency key;
-- mirrors memstore's Settle.
--
-- KEYS[1]  the state key; KEYS[2] the settlement record's (keys.go).
-- ARGV[1]  the header and one request whose cost is actual - reserved,
--          flags 2 (debt) or 10 (debt, a calendar limit's boundaries
--          following).
-- ARGV[2]  the settlement's fingerprint; ARGV[3] the record's TTL in ms.
--
-- KEYS[2] holding ARGV[2] is a retry: nothing charged, the key's numbers
-- now (duplicate 1). Holding anything else: 'ERR floodgate: settle
-- conflict'. Otherwise the delta is charged and the record set in the
-- same call, so a retry after a lost reply finds it.
--
-- Reply: a decide record in REPLY_FMT (lib.lua: allowed, retry_ms
-- until a check of cost 1 passes, no wait), then debt, unrecorded and
-- duplicate, struct '<i8i8B'.

local function settle(KEYS, ARGV)
  local arg = ARGV[1] or ''
  local now, keep, write = read_header(arg)
  local record_ms, cal = tonumber(ARGV[3] or ''), #arg - HDR_LEN - REQ_LEN
  local h, x, y, z, cost, b0, b1, b2, b3, b4
  if now and (cal == 0 or cal == CAL_LEN) then
    h, x, y, z, cost = sunpack(REQ_FMT, arg, HDR_LEN + 1)
    if cal > 0 then
      b0, b1, b2, b3, b4 = sunpack(CAL_FMT, arg, HDR_LEN + REQ_LEN + 1)
    end
  end
  local f = h and ALG[h % 8]
  -- flags 2 (debt), or 10 with a calendar limit's boundaries
  if f == nil or #KEYS ~= 2 or #ARGV ~= 3 or keep < 0 or write ~= 1 or record_ms == nil or record_ms < 1 or h - h % 8 ~= (b0 and 80 or 16) or x < 1 or y < 1 or z < 0 or (b0 and not (b0 < b1 and b1 < b2 and b2 < b3 and b3 < b4)) then
    return redis.error_reply('ERR floodgate: bad settle arguments')
  end
  clock_ms = false
  if now < 0 then
    now = redis_clock()
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
  local _, remaining, _, reset, ttl, _, unrecorded, owed = f(key, x, y, z, cost, 2, now, keep, nil, b0, b1, b2, b3, b4)
  if remaining == nil then
    return redis.error_reply('ERR floodgate: malformed state at key ' .. key)
  end
  -- The wait until a check of cost 1 passes: a dry run on the state written.
  local _, _, retry = f(key, x, y, z, 1, 1, now, keep, nil, b0, b1, b2, b3, b4)
  if dup == 0 then
    redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  end
  return spack(REPLY_FMT .. 'i8i8B', 4 * remaining + 1, retry, reset, ttl, 0, owed, unrecorded, dup)
end
