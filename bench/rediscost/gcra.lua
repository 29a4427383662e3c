#!lua name=fgref
-- gcra.lua: the reference decision of `make redis-cost`, a minimal exact
-- and atomic GCRA (a token bucket of burst 1/T per ms): Redis' TIME once
-- a call; per key one GET, a decode and integer check of the stored
-- theoretical arrival time (8 bytes, a double), one SET ... PX when
-- admitted; one reply string, a byte a key ('1' admitted, '0' denied).
-- Nothing is formatted: the PX is the longest a state can matter (tau +
-- T, from ARGV), so a key may outlive its state, never the other way.
--
-- ARGV: T (ms between two units at the rate), tau (the burst tolerance,
-- T * (burst - 1)) and tau + T, positive integers as decimal strings.

local function gcra(keys, argv)
  local t = redis.call('TIME')
  local us = t[2]
  local now = t[1] * 1000 + (us - us % 1000) / 1000
  local T, tau, px = tonumber(argv[1]), tonumber(argv[2]), argv[3]
  local out = {}
  for i = 1, #keys do
    local key = keys[i]
    local tat = now
    local s = redis.call('GET', key)
    if s then
      if #s ~= 8 then
        return redis.error_reply('ERR malformed state at ' .. key)
      end
      tat = struct.unpack('<d', s)
      if tat % 1 ~= 0 then
        return redis.error_reply('ERR malformed state at ' .. key)
      end
      if tat < now then
        tat = now
      end
    end
    if tat - now <= tau then
      redis.call('SET', key, struct.pack('<d', tat + T), 'PX', px)
      out[i] = '1'
    else
      out[i] = '0'
    end
  end
  return table.concat(out)
end

-- noop is the fixed cost of a call: FCALL, reading its keys and ARGV,
-- a reply.
local function noop(keys, argv)
  return 1
end

redis.register_function('fgref_gcra', gcra)
redis.register_function('fgref_noop', noop)
