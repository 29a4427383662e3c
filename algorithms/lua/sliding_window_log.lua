-- sliding_window_log.lua: the exact sliding window, mirroring
-- decideSlidingLog in algorithms/slidinglog.go line by line.
--
-- Called by batch.lua, not by Redis directly; batch.lua's header gives the
-- script's KEYS, ARGV and reply.
--
-- sliding_window_log(requests, period_ms, s, now_ms, cost) -> s2, d
--   requests, period_ms  the limit
--   s       {at = {...}, n = {...}}: the log, oldest first, one entry per
--           ms: at[i] is a Unix time in ms, n[i] the cost admitted then;
--           empty for a key never seen
--   now_ms  Unix time in ms
--   cost    > 0 spends, 0 looks, < 0 refunds (already clamped by decide)
--   s2      the new state; s itself on a deny or when cost is 0
--   d       new_decision fields, durations in ms
--
-- Redis state: a sorted set with one member per entry, score at[i] and
-- member log_member(at[i], n[i]) = "<at>:<n>" in decimal, so a member is
-- unique per ms and carries its cost.

local function log_member(at, n)
  return string.format('%d:%d', at, n)
end

-- copy_log copies entries first..last of s into a new log.
local function copy_log(s, first, last)
  local at, n = {}, {}
  for i = first, last do
    at[#at + 1] = s.at[i]
    n[#n + 1] = s.n[i]
  end
  return {at = at, n = n}
end

local function sliding_window_log(requests, period_ms, s, now, cost)
  local w = period_ms
  local at = now
  local size = #s.at
  if size > 0 then
    at = math.max(at, s.at[size]) -- the clock went back: decide at the newest entry
  end
  local first = 1
  while first <= size and s.at[first] <= at - w do
    first = first + 1
  end
  local sum = 0
  for i = first, size do
    sum = sum + s.n[i]
  end

  local d = new_decision(requests)
  local nxt
  if cost > 0 and sum + cost > requests then
    d.allowed = 0
    local need = sum + cost - requests
    for i = first, size do
      need = need - s.n[i]
      if need <= 0 then
        d.retry = s.at[i] + w - now
        break
      end
    end
  elseif cost > 0 then
    nxt = copy_log(s, first, size)
    local n = #nxt.at
    if n > 0 and nxt.at[n] == at then
      nxt.n[n] = nxt.n[n] + cost
    else
      nxt.at[n + 1] = at
      nxt.n[n + 1] = cost
    end
    sum = sum + cost
  elseif cost < 0 then
    nxt = copy_log(s, first, size)
    local refund = -cost
    while refund > 0 and #nxt.at > 0 do
      local n = #nxt.at
      local take = math.min(refund, nxt.n[n])
      nxt.n[n] = nxt.n[n] - take
      refund = refund - take
      sum = sum - take
      if nxt.n[n] == 0 then
        nxt.at[n] = nil
        nxt.n[n] = nil
      end
    end
  end -- cost == 0: the log stays as it is (Go: next = live)
  d.remaining = math.max(0, requests - sum)
  if nxt ~= nil then -- allowed, cost ~= 0
    local n = #nxt.at
    if n > 0 then
      d.reset = nxt.at[n] + w - now
    end
  elseif size >= first then -- a deny or a look: the live entries
    d.reset = s.at[size] + w - now
  end
  d.ttl = d.reset
  if d.allowed == 0 or cost == 0 then
    return s, d
  end
  return nxt, d
end
