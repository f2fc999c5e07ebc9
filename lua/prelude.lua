-- prelude: what the decide script's parts share.
--
-- The code Redis runs is assembled at load time (ratelimits/engine/store/scripts.py):
-- this file, then lua/<name>.lua for each algorithm of the registry
-- (ratelimits/engine/algorithms.py, in its order), then give_back.lua and decide.lua,
-- which define decide(KEYS, ARGV): loaded once as a function library (FUNCTION LOAD,
-- then FCALL per request) on Redis 7+, or called from a script by SHA (EVALSHA). A
-- helper of one algorithm lives in its file; only what several parts use is here.
--
-- Each algorithm file adds an entry to ALGORITHMS with three functions:
--   check(key, limit, window_us, now_us, cost, burst)
--       read-only; cost is the units this request spends (integer, 1 <= cost <= the
--       policy's capacity: decide.lua denies a larger cost before asking), burst is the
--       bucket's size (only token_bucket reads it). Returns a table with
--         allowed    true when cost more units fit under the limit
--         count      units counted now, before this request (the estimate for the counter)
--         remaining  units still allowed after this request (0 when denied)
--         retry_us   microseconds until a denied request (its cost) would be allowed
--                    (0 when allowed)
--         reset_us   microseconds until one more unit of quota frees up
--         full_us    when allowed: microseconds until a request of cost 1 after this one
--                    would be allowed, if this one is recorded (0 while quota remains)
--       plus any state that record needs, built in one table constructor (a table that
--       grows after its constructor is rehashed, which costs on every call).
--   record(key, limit, window_us, now_us, state, cost, burst)
--       stores one admitted request of cost units; called only when no enforcing policy
--       denied.
--   give_back(key, limit, window_us, at_us, mark, cost, burst, now_us)
--       undoes what record stored for the request admitted at at_us, after its response
--       (see give_back.lua): mark is the count check returned for it (a whole number for
--       every algorithm that reads it). What already left the window is not touched.
-- An entry may set bursts = true: its capacity (the largest cost it can ever grant) is
-- the burst, not the limit; and released = true: its units come back when responses
-- are done, not with time, so a worker must never remember its denials.
-- KEYS and ARGV are read only by decide.lua.
--
-- The window slot of a policy (ARGV window_ms in decide.lua) is read by window_of: a
-- rolling window, "<ms>", or a calendar period's boundaries, "<b0>,<b1>,<b2>" in
-- milliseconds (the local midnights that start the current period, the next and the one
-- after, as the worker's clock saw them); either may end in "+<lockout_ms>", or in
-- "+<lockout_ms>e" for a lockout that every attempt during it starts again (extended).
-- Only fixed_window takes a calendar period (its window is then a table, see period_of).
--
-- All times are integer microseconds. Lua numbers are doubles, exact to 2^53, so
-- microsecond timestamps (about 1.8e15) are exact; integers are written with int().

local ALGORITHMS = {}

local function int(n)
  return string.format('%.0f', n)
end

local function ceil_div(n, d)
  return math.ceil(n / d)
end

-- A policy's window slot: window_us (a number, or for a calendar period the table of its
-- three boundaries in microseconds), lockout_us (0 for none) and whether every attempt
-- during a lock starts it again. A plain number, the usual slot, is read without a
-- pattern.
local function window_of(spec)
  local ms = tonumber(spec)
  if ms then
    return ms * 1000, 0, false
  end
  local window, lockout, extend = string.match(spec, '^([^+]+)%+(%d+)(e?)$')
  if not window then
    window, lockout, extend = spec, '0', ''
  end
  local lockout_us = tonumber(lockout) * 1000
  ms = tonumber(window)
  if ms then
    return ms * 1000, lockout_us, extend == 'e'
  end
  local b0, b1, b2 = string.match(window, '^(%d+),(%d+),(%d+)$')
  if not b0 then
    return nil, 0, false
  end
  return {tonumber(b0) * 1000, tonumber(b1) * 1000, tonumber(b2) * 1000}, lockout_us, extend == 'e'
end

-- The key holding a policy's lockout: its counts' key with the last part "lock".
local function lock_key(key)
  return (string.gsub(key, '[^:]+$', 'lock'))
end

-- The window holding at_us: its index (a rolling window's number since the epoch, a
-- calendar period's start in microseconds) and its end. A worker sends the boundaries of
-- the period its clock is in and of the next, so a Redis clock a little ahead still finds
-- its period; one further off gets a period of the same length beside them.
local function period_of(window, at_us)
  if type(window) == 'number' then
    local index = math.floor(at_us / window)
    return index, (index + 1) * window
  end
  local b0, b1, b2 = window[1], window[2], window[3]
  if at_us < b0 then
    return b0 - (b1 - b0), b0
  elseif at_us < b1 then
    return b0, b1
  elseif at_us < b2 then
    return b1, b2
  end
  return b2, b2 + (b2 - b1)
end

-- ZADD (or ZREM) of a flat list of arguments, 512 at a time (unpack's stack): the
-- sorted sets of sliding_log and concurrency.
local function zcall(command, key, args)
  for i = 1, #args, 512 do
    redis.call(command, key, unpack(args, i, math.min(#args, i + 511)))
  end
end
