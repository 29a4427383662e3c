-- demand.lua: one reporter's demand on one shared quota budget (the Rate
-- Limit Quota Service's fair shares), and the budget's totals. Mirrors
-- memstore.Demand.ReportDemand; called by Demand.ReportDemand, a
-- function of the library (script.go).
--
-- KEYS[1]  the budget's hash:
--            "r:<reporter>" = "milliRPS:expiresAtMs", one per reporter
--            "#n", "#sum"   = the reporters and their summed demand
--            "#min"         = no report expires before this (Unix ms)
-- ARGV[1]  reporter (opaque string)
-- ARGV[2]  demand, thousandths of a request per second (integer >= 0)
-- ARGV[3]  now, Unix milliseconds (the caller's clock)
-- ARGV[4]  the report's TTL, milliseconds (> 0)
--
-- Reply: {reporters, milliRPS}: the live reports (the new one included)
-- and their summed demand.
--
-- "#n" and "#sum" count every report in the hash, expired or not; none is
-- expired while now < "#min", so they are exact then and a report costs
-- O(1). Once now reaches "#min" the hash is scanned: expired reports are
-- deleted and the totals and "#min" recomputed. With reporters renewing
-- every reporting interval that is one O(reporters) scan per TTL or so.
-- The key expires with its last live report.
local function demand(KEYS, ARGV)
  local key = KEYS[1]
  local field = 'r:' .. ARGV[1]
  local rate = tonumber(ARGV[2])
  local now = tonumber(ARGV[3])
  local exp = now + tonumber(ARGV[4])

  local function parse(v)
    if not v then return nil end
    local sep = string.find(v, ':', 1, true)
    if not sep then return nil end
    return tonumber(string.sub(v, 1, sep - 1)), tonumber(string.sub(v, sep + 1))
  end

  local meta = redis.call('HMGET', key, '#n', '#sum', '#min', '#max')
  local n = tonumber(meta[1]) or 0
  local sum = tonumber(meta[2]) or 0
  local mn = tonumber(meta[3]) or exp
  local mx = tonumber(meta[4]) or exp

  local r, e = parse(redis.call('HGET', key, field))
  if r then
    n = n - 1
    sum = sum - r
  end
  redis.call('HSET', key, field, ARGV[2] .. ':' .. exp)
  n = n + 1
  sum = sum + rate
  if exp < mn then mn = exp end
  if exp > mx then mx = exp end

  if now >= mn then
    n, sum, mn, mx = 0, 0, exp, exp
    local all = redis.call('HGETALL', key)
    for i = 1, #all, 2 do
      local f = all[i]
      if string.sub(f, 1, 2) == 'r:' then
        local fr, fe = parse(all[i + 1])
        if not fr or not fe or fe <= now then
          redis.call('HDEL', key, f)
        else
          n = n + 1
          sum = sum + fr
          if fe < mn then mn = fe end
          if fe > mx then mx = fe end
        end
      end
    end
  end
  redis.call('HSET', key, '#n', n, '#sum', sum, '#min', mn, '#max', mx)
  redis.call('PEXPIRE', key, mx - now)
  return {n, sum}
end
