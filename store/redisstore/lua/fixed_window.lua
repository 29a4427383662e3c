-- fixed_window.lua: the fixed window and a calendar quota's period,
-- mirroring fixedWindow, fixedCount and fixedDecide in
-- algorithms/fixedwindow.go and the fixed window's part of
-- decideCalendar; fixed_window is its ALG function (lib.lua).
--
-- Each window counts in a key of its own: the state key, '#' and the
-- window's end (ms - STATE_EPOCH_MS): one integer, which a charge adds
-- to with INCRBY (taken back when it does not fit) and whose expiry, the
-- window's end plus keep, is set by the charge that creates it. As the
-- name holds the end, the expiry is right whichever limit created the
-- key: windows of two periods that end together share a count, and a
-- period change that moves the end starts the count afresh. A
-- calendar limit's window is [b1, b2) (decided at b1 for a now before
-- it) or [b2, b3); a now at or past b3 is out of range: a charge is
-- denied with retry 1000 ms (a debt: all unrecorded), nothing written.

-- WIN[stop] is the key suffix of the window ending at stop, made once
-- per window; forgotten 4,096 windows on.
local WIN, WIN_N = {}, 0

local function window_suffix(stop)
  if WIN_N >= 4096 then
    WIN, WIN_N = {}, 0
  end
  local s = '#' .. (stop - STATE_EPOCH_MS)
  WIN[stop], WIN_N = s, WIN_N + 1
  return s
end

local function fixed_window(key, requests, w, _, cost, flags, now, keep, undo, b0, b1, b2, b3, b4)
  local never, debt = false, flags % 4 >= 2
  if cost > requests and not debt then
    cost, never = 0, true
  elseif cost < -requests then
    cost = -requests
  end
  local start, stop
  if b0 then
    if now >= b3 then -- out of range: the clocks disagree by a period
      local allowed, retry, unrecorded = 1, 0, 0
      if never then
        allowed, retry = 0, -1
      elseif cost > 0 and debt then
        unrecorded = cost
      elseif cost > 0 then
        allowed, retry = 0, 1000
      end
      return allowed, 0, retry, 1000, b4 - b1, 0, unrecorded, 0
    elseif now >= b2 then
      start, stop = b2, b3
    else
      start, stop = b1, b2
    end
  else
    start = now - now % w
    stop = start + w
  end
  local wkey = key .. (WIN[stop] or window_suffix(stop))
  local allowed, retry, unrecorded, count = 1, 0, 0, 0
  local write = flags % 2 == 0
  if cost > 0 and not debt and write then
    -- The common charge: added first, taken back when it does not fit.
    local cs = NUM_STR[cost] or num_string(cost)
    local v = rpcall('INCRBY', wkey, cs)
    if rtype(v) ~= 'number' then
      return nil
    end
    if v > requests then
      allowed, retry, count = 0, stop - now, v - cost
      if v == cost then
        rcall('DEL', wkey)
      else
        rcall('DECRBY', wkey, cs)
      end
      if count > 2 * requests then
        count = 2 * requests
      end
    else
      count = v
      if undo then
        remember(undo, wkey, v ~= cost and cost, false)
      end
      if v == cost then
        rcall('PEXPIRE', wkey, px_string(stop - now + keep))
      end
    end
  else
    local str = rcall('GET', wkey)
    local raw = 0
    if str then
      raw = tonumber(str)
      if raw == nil or raw < 0 or raw % 1 ~= 0 then
        return nil
      end
    end
    count = raw
    if count > 2 * requests then
      count = 2 * requests
    end
    local add = 0 -- what the write adds to the stored count
    if cost > 0 and debt then
      local k = 2 * requests - count
      if k > cost then
        k = cost
      elseif k < 0 then
        k = 0
      end
      count, unrecorded = count + k, cost - k
      add = count - raw -- a count above 2 × requests comes down to it, as in Go
    elseif cost > 0 then -- a dry run
      if count + cost > requests then
        allowed, retry = 0, stop - now
      else
        count = count + cost
      end
    elseif cost < 0 then
      local left = count + cost
      if left < 0 then
        left = 0
      end
      count, add = left, left - raw
    end
    if write and add ~= 0 then
      if count == 0 then
        if undo then
          remember(undo, wkey, str, true)
        end
        rcall('DEL', wkey)
      else
        if undo then
          remember(undo, wkey, str and add or false, false)
        end
        if rcall('INCRBY', wkey, NUM_STR[add] or num_string(add)) == add then
          rcall('PEXPIRE', wkey, px_string(stop - now + keep))
        end
      end
    end
  end
  local remaining, reset, owed = requests - count, 0, count - requests
  if remaining < 0 then
    remaining = 0
  end
  if owed < 0 then
    owed = 0
  end
  if count > 0 then
    reset = stop - now
  end
  local ttl = reset
  if ttl == 0 and start > now then
    -- A now before a calendar period's start: its window still decides
    -- differently from no state until the clock reaches it.
    ttl = start - now
  end
  if never then
    allowed, retry = 0, -1
  end
  return allowed, remaining, retry, reset, ttl, 0, unrecorded, owed
end

ALG[ALG_FIXED_WINDOW] = fixed_window
