-- sliding_window_log.lua: the exact sliding window, mirroring
-- planSlidingLog, logPlan.apply and slidingLogDebt in
-- algorithms/slidinglog.go (which explains the ring) line by line.
--
-- The log is a ring of the times of the last admitted units, one slot a
-- unit, sorted oldest to newest from the head. In Redis it is one string:
--
--   header  LOG_HDR bytes, struct LOG_HDR_FMT: format (1), n (the number
--           of slots), head (Go's State.A), low (State.C), floor
--           (State.B) - STATE_EPOCH_MS
--   slots   n slots, struct '<i6': the unit's Unix ms - STATE_EPOCH_MS;
--           LOG_EMPTY_REL for an empty slot
--
-- so a ring of n slots is 19 + 6n bytes: 60,019 for a full log of
-- MaxLogRequests (10,000) units. Times must lie within 2^47 ms of
-- STATE_EPOCH_MS. One GETRANGE reads the header and up to LOG_WHOLE
-- slots. A ring that fits is decided on that string and written whole
-- with one SET. A larger one is read LOG_BLOCK slots at a time, as the
-- search needs them, and written in place (its changed slots and header
-- with SETRANGE, then PEXPIRE) unless it is resized.

local LOG_HDR, LOG_SLOT, LOG_MIN_SLOTS, LOG_WHOLE, LOG_BLOCK = 19, 6, 8, 64, 8
local LOG_HDR_FMT = '<BI4I4I4i6'
local LOG_EMPTY_REL = -140737488355328 -- -2^47: the packed empty slot
local LOG_EMPTY = -9007199254740992 -- below every time, as Go's emptySlot
local LOG_EMPTY_SLOT = '\0\0\0\0\0\128' -- LOG_EMPTY_REL packed
-- The last byte of the first GETRANGE, as a string made once (a number
-- handed to redis.call is formatted each time).
local LOG_WHOLE_LAST = (LOG_HDR + LOG_WHOLE * LOG_SLOT - 1) .. ''

-- log_slots is the packed slots from index p to q - 1 (q <= n) of the
-- ring str; of key when key is given (a large ring), str then the
-- blocks read so far (index: packed slots).
local function log_slots(str, key, p, q)
  if key == nil then
    return string.sub(str, LOG_HDR + p * LOG_SLOT + 1, LOG_HDR + q * LOG_SLOT)
  end
  return rcall('GETRANGE', key, LOG_HDR + p * LOG_SLOT, LOG_HDR + q * LOG_SLOT - 1)
end

-- log_at is the i-th oldest slot of the ring of n slots from head (str
-- and key as log_slots').
local function log_at(str, key, head, n, i)
  local p = head + i
  if p >= n then
    p = p - n
  end
  local pos = LOG_HDR + p * LOG_SLOT + 1
  if key then
    local b = p - p % LOG_BLOCK
    local block = str[b]
    if block == nil then
      block = log_slots(nil, key, b, math.min(b + LOG_BLOCK, n))
      str[b] = block
    end
    pos, str = (p - b) * LOG_SLOT + 1, block
  end
  local rel = sunpack('<i6', str, pos)
  if rel == LOG_EMPTY_REL then
    return LOG_EMPTY
  end
  return rel + STATE_EPOCH_MS
end

-- log_first_live is the index of the first slot above cut, n if none:
-- the first lo are at or below it. It gallops from lo, then bisects.
local function log_first_live(str, key, head, n, lo, cut)
  local hi, step = n, 1
  while lo < n do
    local probe = lo + step - 1
    if probe > n - 1 then
      probe = n - 1
    end
    if log_at(str, key, head, n, probe) > cut then
      hi = probe
      break
    end
    lo, step = probe + 1, step * 2
  end
  while lo < hi do
    local mid = lo + hi
    mid = (mid - mid % 2) / 2
    if log_at(str, key, head, n, mid) > cut then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

-- log_fill sets k slots from index p on (wrapping past the n slots) of
-- the ring str to the packed slot v: in key with SETRANGE when key is
-- given, else in the slots it returns (str's without the header).
local function log_fill(str, key, n, p, k, v)
  local first = n - p
  if first > k then
    first = k
  end
  if key then
    rcall('SETRANGE', key, LOG_HDR + p * LOG_SLOT, string.rep(v, first))
    if k > first then
      rcall('SETRANGE', key, LOG_HDR, string.rep(v, k - first))
    end
    return
  end
  local run = v
  if first > 1 then
    run = string.rep(v, first)
  end
  local body = string.sub(str, LOG_HDR + 1, LOG_HDR + p * LOG_SLOT) .. run .. string.sub(str, LOG_HDR + (p + first) * LOG_SLOT + 1)
  if k > first then
    body = string.rep(v, k - first) .. string.sub(body, (k - first) * LOG_SLOT + 1)
  end
  return body
end

-- log_alg is the log's ALG function (lib.lua): requests and period_ms
-- are x and y. A debt records what the free slots hold, never owes: the
-- rest of its cost is unrecorded.
local function log_alg(key, requests, w, _, cost, flags, now, keep, undo)
  local str = rcall('GETRANGE', key, '0', LOG_WHOLE_LAST)
  local n, head, low, floor = 0, 0, 0, 0
  local at, cut, top, big = now, LOG_EMPTY, LOG_EMPTY, nil
  if str ~= '' then
    local format, len = nil, #str
    if len >= LOG_HDR then
      format, n, head, low, floor = sunpack(LOG_HDR_FMT, str)
    end
    if n > LOG_WHOLE and len == LOG_HDR + LOG_WHOLE * LOG_SLOT then
      big, str, len = key, {}, rcall('STRLEN', key)
    end
    if format ~= 1 or n < 1 or head >= n or low > n or len ~= LOG_HDR + n * LOG_SLOT then
      return nil
    end
    cut = floor + STATE_EPOCH_MS
    top = log_at(str, big, head, n, n - 1)
    if top > cut and top > at then
      at = top -- the clock went back: decide at the newest unit
    end
  end
  if at - w > cut then
    cut = at - w
  end
  local lo = low -- in steady use the first live slot is at low
  if low < n and log_at(str, big, head, n, low) <= cut then
    lo = log_first_live(str, big, head, n, low + 1, cut)
  end
  local live0 = n - lo
  local unrecorded, never = 0, false
  if flags % 4 >= 2 and cost > 0 and live0 + cost > requests then -- debt
    local k = requests - live0
    if k < 0 then
      k = 0
    end
    unrecorded, cost = cost - k, k
  end
  if cost > requests then
    cost, never = 0, true
  elseif cost < -requests then
    cost = -requests
  end
  local allowed, retry, live, newest, k = 1, 0, live0, top, 0
  if cost > 0 and live0 + cost > requests then
    allowed = 0 -- the need-th oldest live unit must leave
    retry = log_at(str, big, head, n, n - requests + cost - 1) + w - now
  elseif cost > 0 then
    live, newest = live0 + cost, at
  elseif cost < 0 then
    k = -cost -- refunds give back the newest live units
    if k > live0 then
      k = live0
    end
    live = live0 - k
    if live > 0 then
      newest = log_at(str, big, head, n, n - 1 - k)
    end
  end
  local remaining, reset = requests - live, 0
  if remaining < 0 then -- a ring kept from a larger limit
    remaining = 0
  end
  if live > 0 then
    reset = newest + w - now
  end
  if never then
    return 0, remaining, -1, reset, reset, 0, 0, 0
  end
  if allowed == 0 or cost == 0 or flags % 2 == 1 then
    return allowed, remaining, retry, reset, reset, 0, unrecorded, 0
  end
  if undo then
    local old = str
    if big then
      old = rcall('GET', key)
    end
    remember(undo, key, old ~= '' and old, cost < 0 or live == 0)
  end
  if live == 0 then
    rcall('DEL', key) -- nothing left: no state
    return allowed, remaining, retry, reset, reset, 0, unrecorded, 0
  end
  -- logPlan.apply
  local body
  if cost > 0 then
    local v = at - STATE_EPOCH_MS
    if v <= LOG_EMPTY_REL or v >= -LOG_EMPTY_REL then
      error('floodgate: time out of range for the sliding window log')
    end
    v = spack('<i6', v)
    local target = 2 * live
    if target < LOG_MIN_SLOTS then
      target = LOG_MIN_SLOTS
    end
    if target > requests then
      target = requests
    end
    if live0 == 0 or n - live0 < cost or n > 2 * target then
      -- logPlan.resize: the live units, oldest first, after the empty slots.
      local p = head + n - live0
      if p >= n then
        p = p - n
      end
      local kept = ''
      if p + live0 > n then
        kept = log_slots(str, big, p, n) .. log_slots(str, big, 0, p + live0 - n)
      elseif live0 > 0 then
        kept = log_slots(str, big, p, p + live0)
      end
      n, head, low, floor, big = target, 0, target - live, at - w, nil
      body = string.rep(LOG_EMPTY_SLOT, low) .. kept .. string.rep(v, cost)
    else
      body = log_fill(str, big, n, head, cost, v)
      head, low, floor = (head + cost) % n, n - live, cut
    end
  else
    head = (head - k + n) % n
    body = log_fill(str, big, n, head, k, LOG_EMPTY_SLOT)
    low, floor = n - live, cut
  end
  local hdr = spack(LOG_HDR_FMT, 1, n, head, low, floor - STATE_EPOCH_MS)
  if big then
    rcall('SETRANGE', key, 0, hdr)
    rcall('PEXPIRE', key, px_string(reset + keep))
  else
    rcall('SET', key, hdr .. body, 'PX', px_string(reset + keep))
  end
  return allowed, remaining, retry, reset, reset, 0, unrecorded, 0
end

ALG[ALG_SLIDING_WINDOW_LOG] = log_alg
