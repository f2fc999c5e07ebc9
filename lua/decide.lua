-- decide: one request against every policy that matches it, in one call, all or nothing.
--
-- KEYS[i]  the key of policy i, i = 1..n (all in one hash slot on a cluster)
-- ARGV[1]  now in microseconds, or "" to use the Redis server's clock (TIME)
-- ARGV[2]  "1" to record an admitted request, "0" to only look (nothing is written),
--          "2" to give back what an admitted request recorded (see give_back.lua)
-- ARGV[3 + 6 * (i - 1) .. 8 + 6 * (i - 1)], for each policy i:
--          algorithm   a name in the registry, ratelimits/engine/algorithms.py (each
--                      one's lua/<name>.lua adds it to ALGORITHMS)
--          limit       units per window, integer >= 1
--          window_ms   window length in milliseconds, or a calendar period's
--                      boundaries, either with a lockout: see window_of in prelude.lua
--          enforce     "1" for an enforcing policy, "0" for a shadow one
--          burst       units that may be spent at once (token_bucket; others ignore it)
--          cost        units this request spends, integer >= 1 (last: the engine sends
--                      the other slots pre-encoded, and "1" or the request's own cost)
--
-- A cost above what the policy can ever grant (the limit; the burst for token_bucket) is
-- denied with retry_us = the window, and nothing is written: never an error, never stuck.
--
-- Every policy is checked first, without writing. The request is admitted when no
-- enforcing policy denies it; only then, and only when ARGV[2] is "1", is it recorded,
-- in every policy that allowed it. A request denied by one policy consumes nothing
-- from the others.
--
-- Returns {admitted, now_us, then for each policy i:
--          allowed, count x 1000, remaining, retry_ms, reset_ms, blocked_us}
-- allowed is 1 when the policy allowed the request, 0 when it denied it, and 2 when it
-- denied it and this call started its lockout (once per lock: ratelimits.signals'
-- lockout_started).
-- blocked_us is how long, from now, the key denies every request of this cost or more
-- whatever happens elsewhere (only admissions consume, only time frees): a denied
-- policy's retry time (0 for a cost it can never grant), or
-- for a policy that recorded this request with its last unit of quota, the time until the
-- next one of cost 1 fits; else 0. Workers answer such requests themselves until then.
-- A concurrency policy's units come back with responses, not with time: its blocked_us
-- is always 0.
--
-- A policy with a lockout (window_ms ending in "+<lockout_ms>") denies every request for
-- lockout_ms after the first request it denied: a recorded denial sets the key's lock,
-- "<prefix>:{<identity>}:<policy>:lock", beside its counts (same hash slot), to the
-- time the lockout ends (microseconds, expiring then), and the policy admits no request
-- before that time. Its last unit spent is not remembered by workers (blocked_us 0): the
-- denial after it must reach Redis to start the lockout. The retry time of
-- a locked-out request is the longer of the lock left and the window's own wait. An
-- extended lockout ("+<lockout_ms>e") is started again by every recorded attempt during
-- it, so its denials are never remembered by workers either (blocked_us 0).

-- A request's cost slot as a number: "1", the usual cost, without parsing it (a string
-- to number conversion is a third of a microsecond, a tenth of a redis.call).
local function units_of(slot)
  if slot == '1' then
    return 1
  end
  return tonumber(slot)
end

-- A policy's burst slot as a number, read only by an algorithm that has bursts (0 for the
-- others, which ignore it).
local function burst_of(algorithm, slot)
  if algorithm.bursts then
    return tonumber(slot)
  end
  return 0
end

-- One policy's check, or the denial of a cost it can never grant; a live lockout denies.
local function check_policy(algorithm, key, limit, window, now_us, burst, cost, lockout_us)
  local r
  if cost > (algorithm.bursts and burst or limit) then
    local counted = algorithm.check(key, limit, window, now_us, 1, burst)
    local _, ends_us = period_of(window, now_us)
    local wait_us = type(window) == 'number' and window or ends_us - now_us
    r = {
      allowed = false, count = counted.count, remaining = 0, retry_us = wait_us,
      reset_us = wait_us, oversized = true,
    }
  else
    r = algorithm.check(key, limit, window, now_us, cost, burst)
  end
  if lockout_us > 0 then
    local until_us = tonumber(redis.call('GET', lock_key(key)))
    if until_us and until_us > now_us then
      r.allowed, r.remaining, r.locked = false, 0, true
      r.retry_us = math.max(r.retry_us, until_us - now_us)
      r.reset_us = math.max(r.reset_us, r.retry_us)
    end
  end
  return r
end

-- The window slot read, and refused when its algorithm cannot take it.
local function window_for(algorithm, spec)
  local window, lockout_us, extend = window_of(spec)
  if window == nil then
    return nil, 'ratelimits: bad window ' .. tostring(spec)
  end
  if type(window) == 'table' and not algorithm.calendar then
    return nil, 'ratelimits: this algorithm has no calendar windows'
  end
  return window, lockout_us, extend
end

-- A recorded denial by a policy with a lockout starts it (unless one is running), or
-- for an extended lockout starts it again from now (started is set only for a new lock).
local function start_lockout(key, r, lockout_us, now_us, extend)
  if lockout_us > 0 and (extend or not r.locked) then
    redis.call('SET', lock_key(key), int(now_us + lockout_us), 'PX', ceil_div(lockout_us, 1000))
    if not r.locked then
      r.locked, r.started = true, true
    end
    r.retry_us = math.max(r.retry_us, lockout_us)
    r.reset_us = math.max(r.reset_us, r.retry_us)
  end
end

local function decide(KEYS, ARGV)
  if ARGV[2] == '2' then
    return give_back(KEYS, ARGV)
  end
  local now_us
  if ARGV[1] ~= '' then
    now_us = tonumber(ARGV[1])
  else
    local time = redis.call('TIME')
    now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
  end

  local count = #KEYS
  if count == 1 then
    -- One policy, the usual request: no per-policy tables, the reply built at once.
    local algorithm = ALGORITHMS[ARGV[3]]
    if not algorithm then
      return redis.error_reply('ratelimits: unknown algorithm ' .. tostring(ARGV[3]))
    end
    local limit, burst, cost = tonumber(ARGV[4]), burst_of(algorithm, ARGV[7]), units_of(ARGV[8])
    local window, lockout_us, extend = window_for(algorithm, ARGV[5])
    if window == nil then
      return redis.error_reply(lockout_us)
    end
    local r = check_policy(algorithm, KEYS[1], limit, window, now_us, burst, cost, lockout_us)
    local allowed = r.allowed
    local blocked_us = 0
    if not allowed then
      if ARGV[2] == '1' then
        start_lockout(KEYS[1], r, lockout_us, now_us, extend)
      end
      if extend then -- every attempt must come here, to start the lock again
        blocked_us = 0
      elseif not r.oversized or r.locked then
        blocked_us = math.floor(r.retry_us)
      end
    elseif ARGV[2] == '1' then
      algorithm.record(KEYS[1], limit, window, now_us, r, cost, burst)
      if lockout_us == 0 then -- the next request must come here, to start the lockout
        blocked_us = math.floor(r.full_us)
      end
    end
    if algorithm.released then
      blocked_us = 0
    end
    return {
      (allowed or ARGV[6] ~= '1') and 1 or 0, now_us, allowed and 1 or (r.started and 2 or 0),
      math.floor(r.count * 1000 + 0.5), r.remaining, math.ceil(r.retry_us / 1000),
      math.ceil(r.reset_us / 1000), blocked_us,
    }
  end

  local algorithms, results, windows, lockouts, extends = {}, {}, {}, {}, {}
  local admitted = true
  for i = 1, count do
    local base = 6 * i - 3
    local algorithm = ALGORITHMS[ARGV[base]]
    if not algorithm then
      return redis.error_reply('ratelimits: unknown algorithm ' .. tostring(ARGV[base]))
    end
    local window, lockout_us, extend = window_for(algorithm, ARGV[base + 2])
    if window == nil then
      return redis.error_reply(lockout_us)
    end
    local result = check_policy(
      algorithm, KEYS[i], tonumber(ARGV[base + 1]), window, now_us,
      burst_of(algorithm, ARGV[base + 4]), units_of(ARGV[base + 5]), lockout_us)
    algorithms[i], results[i], windows[i], lockouts[i] = algorithm, result, window, lockout_us
    extends[i] = extend
    if not result.allowed and ARGV[base + 3] == '1' then
      admitted = false
    end
  end

  local recorded = admitted and ARGV[2] == '1'
  local reply = {admitted and 1 or 0, now_us}
  local n = 2
  for i = 1, count do
    local r = results[i]
    local allowed = r.allowed
    local blocked_us = 0
    if not allowed then
      if ARGV[2] == '1' then
        start_lockout(KEYS[i], r, lockouts[i], now_us, extends[i])
      end
      if extends[i] then
        blocked_us = 0
      elseif not r.oversized or r.locked then
        blocked_us = math.floor(r.retry_us)
      end
    elseif recorded then
      local base = 6 * i - 3
      algorithms[i].record(
        KEYS[i], tonumber(ARGV[base + 1]), windows[i], now_us, r,
        units_of(ARGV[base + 5]), burst_of(algorithms[i], ARGV[base + 4]))
      if lockouts[i] == 0 then
        blocked_us = math.floor(r.full_us)
      end
    end
    if algorithms[i].released then
      blocked_us = 0
    end
    reply[n + 1] = allowed and 1 or (r.started and 2 or 0)
    reply[n + 2] = math.floor(r.count * 1000 + 0.5)
    reply[n + 3] = r.remaining
    reply[n + 4] = math.ceil(r.retry_us / 1000)
    reply[n + 5] = math.ceil(r.reset_us / 1000)
    reply[n + 6] = blocked_us
    n = n + 6
  end
  return reply
end
