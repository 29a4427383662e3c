-- demand.lua: one reporter's demand on one shared quota budget (the Rate
-- Limit Quota Service's fair shares), and the budget's totals. Mirrors
-- memstore.Demand.ReportDemand; called by Demand.ReportDemand.
--
-- KEYS[1]  the budget's hash: field = reporter, value = "milliRPS:expiresAtMs"
-- ARGV[1]  reporter (opaque string)
-- ARGV[2]  demand, thousandths of a request per second (integer >= 0)
-- ARGV[3]  now, Unix milliseconds (the caller's clock)
-- ARGV[4]  the report's TTL, milliseconds (> 0)
--
-- Reply: {reporters, milliRPS}: the live reports (the new one included)
-- and their summed demand. Expired and malformed fields are deleted; the
-- key expires with its last live report.
local now = tonumber(ARGV[3])
local exp = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. exp)
local all = redis.call('HGETALL', KEYS[1])
local n, total, last = 0, 0, exp
for i = 1, #all, 2 do
  local v = all[i + 1]
  local sep = string.find(v, ':', 1, true)
  local r, e
  if sep then
    r = tonumber(string.sub(v, 1, sep - 1))
    e = tonumber(string.sub(v, sep + 1))
  end
  if not r or not e or e <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    n = n + 1
    total = total + r
    if e > last then last = e end
  end
end
redis.call('PEXPIRE', KEYS[1], last - now)
return {n, total}
