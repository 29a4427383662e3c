-- demand.lua: one reporter's demand on a shared quota budget (the Rate
-- Limit Quota Service's fair shares), and the budget's totals; mirrors
-- memstore.Demand.ReportDemand.
--
-- KEYS[1]  the budget's hash: "r:<reporter>" = "milliRPS:expiresAtMs";
--          "#n", "#sum" the reports and their summed demand, "#min" no
--          report expires before it, "#max" the last expiry (Unix ms)
-- ARGV     reporter, demand (milli-requests/s, >= 0), now (Unix ms, the
--          caller's clock), the report's TTL (ms, > 0)
--
-- Reply: {reporters, milliRPS} of the live reports. "#n" and "#sum"
-- count every report, exact while now < "#min", so a report is O(1);
-- once now reaches "#min" the hash is scanned, expired reports deleted
-- and the totals recomputed. The key expires with its last report.

-- demand_report reads a report, "milliRPS:expiresAtMs" (false: none):
-- its two numbers, nil for one that does not parse.
local function demand_report(v)
  local r, e = string.match(v or '', '^([^:]*):(.*)$')
  return tonumber(r), tonumber(e)
end

local function demand(KEYS, ARGV)
  local key = KEYS[1]
  local field = 'r:' .. ARGV[1]
  local rate = tonumber(ARGV[2])
  local now = tonumber(ARGV[3])
  local exp = now + tonumber(ARGV[4])

  local meta = redis.call('HMGET', key, '#n', '#sum', '#min', '#max', field)
  local n = tonumber(meta[1]) or 0
  local sum = tonumber(meta[2]) or 0
  local mn = tonumber(meta[3]) or exp
  local mx = tonumber(meta[4]) or exp
  local r = demand_report(meta[5])
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
        local fr, fe = demand_report(all[i + 1])
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
