-- forget.lua: drops one reporter's report from a budget's hash (see
-- demand.lua) and marks the totals for a rescan at the next report.
-- Called by Demand.ForgetDemand, a function of the library (script.go).
--
-- KEYS[1]  the budget's hash
-- ARGV[1]  reporter
--
-- Reply: 1 when the reporter had a report, else 0.
local function forget(KEYS, ARGV)
  if redis.call('HDEL', KEYS[1], 'r:' .. ARGV[1]) == 1 then
    redis.call('HSET', KEYS[1], '#min', 0)
    return 1
  end
  return 0
end
