-- forget.lua: drops a reporter's report from a budget's hash
-- (demand.lua), KEYS[1], ARGV[1] the reporter, and marks the totals for
-- a rescan. Reply: 1 when it had a report, else 0.
local function forget(KEYS, ARGV)
  if redis.call('HDEL', KEYS[1], 'r:' .. ARGV[1]) == 1 then
    redis.call('HSET', KEYS[1], '#min', 0)
    return 1
  end
  return 0
end
