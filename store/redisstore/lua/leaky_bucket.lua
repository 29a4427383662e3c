-- leaky_bucket.lua: the leaky bucket (a queue that shapes instead of
-- refusing), mirroring decideLeakyBucket in algorithms/leakybucket.go
-- line by line.
--
-- leaky_bucket(per_ms, scale, capacity, a, b, c, now_ms, cost, flags,
-- debt): the limit's rate in lowest terms and queue size; the state, the
-- queue's end as b whole ms plus a units of 1/c ms (c = per_ms; 0, 0, 0
-- for none); cost already clamped (a give-back frees nothing); flag bit
-- 2, no-wait, admits only what may start now (algorithms.NoWait). As
-- counter.lua's decide (no calendar); the new state is 0, 0, 0 when the
-- queue is empty, the old one on a deny or a cost of 0 or less.

local function leaky_bucket(per_ms, scale, capacity, a, b, c, now, cost, flags, debt)
  local nowait = flags % 8 >= 4 -- flag bit 2
  local full = capacity * scale
  -- Go's lead > full / perMs (a floor) is lead * per_ms > full here,
  -- and so with 2 * full: for lead >= 0 the same, and exact (a product
  -- at or below 2 * full < 2^53 is exact, one beyond 2^53 reads beyond
  -- it).
  local end_ms, end_u = b, a
  if c ~= 0 and c ~= per_ms and end_u > 0 then
    -- The rate changed: round the end up to a whole ms.
    end_ms, end_u = end_ms + 1, 0
  end
  if c == 0 or end_ms < now or (end_ms == now and end_u == 0) then
    end_ms, end_u = now, 0 -- an empty queue
  end
  local lead = end_ms - now
  local wait = lead
  if end_u > 0 then
    wait = wait + 1
  end
  -- Up to twice the queue's length in debt.
  local over = lead * per_ms > 2 * full
  local queued = 0
  if not over then
    queued = lead * per_ms + end_u
  end

  local allowed, retry, w, unrecorded = 1, 0, 0, 0
  if cost > 0 and debt == 1 then
    local k = 0
    if not over then
      k = quo(2 * full - queued, scale) -- >= 0 here
      if k > cost then
        k = cost
      elseif k < 0 then
        k = 0
      end
    end
    w = wait
    unrecorded = cost - k
    end_u = end_u + k * scale
    local q = quo(end_u, per_ms)
    end_ms, end_u = end_ms + q, end_u - q * per_ms
  elseif cost > 0 and nowait and wait > 0 then
    allowed, retry = 0, wait
  elseif cost > 0 and (over or queued + cost * scale > full) then
    allowed = 0
    -- floorDiv(full - end_u - cost * scale, per_ms): quo truncates.
    local x = full - end_u - cost * scale
    local q = quo(x, per_ms)
    if q * per_ms > x then
      q = q - 1
    end
    retry = lead - q
  elseif cost > 0 then
    w = wait
    end_u = end_u + cost * scale
    local r = end_u % per_ms -- end_u >= 0: quo's steps
    end_ms, end_u = end_ms + (end_u - r) / per_ms, r
  elseif cost < 0 then
    -- A give-back frees nothing: it cannot say which slots are its own.
  else
    w = wait
  end

  lead = end_ms - now
  local empty = lead == 0 and end_u == 0
  local remaining = 0
  if empty then
    remaining = capacity
  elseif not nowait and lead * per_ms <= full then
    local x = full - lead * per_ms - end_u -- quo, then at least 0
    if x > 0 then
      remaining = (x - x % scale) / scale
    end
  end
  local owed = 0
  if debt == 1 and lead > 0 and (lead - 1) * per_ms <= 2 * full then
    -- Slots taken past the queue's size.
    local q = lead * per_ms + end_u
    if q > full then
      owed = quo(q - full + scale - 1, scale)
    end
  end
  if end_u > 0 then
    lead = lead + 1
  end
  if allowed == 0 or cost <= 0 then
    return allowed, remaining, retry, lead, lead, a, b, c, w, unrecorded, owed
  end
  if empty then
    return allowed, remaining, retry, lead, lead, 0, 0, 0, w, unrecorded, owed
  end
  return allowed, remaining, retry, lead, lead, end_u, end_ms, per_ms, w, unrecorded, owed
end
