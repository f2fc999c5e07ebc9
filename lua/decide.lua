-- decide: one request against every policy that matches it, in one call, all or nothing.
--
-- KEYS[i]  the key of policy i, i = 1..n (all in one hash slot on a cluster)
-- ARGV[1]  now in microseconds, or "" to use the Redis server's clock (TIME)
-- ARGV[2]  "1" to record an admitted request, "0" to only look (nothing is written),
--          "2" to give back what an admitted request recorded (see give_back.lua)
-- ARGV[3 + 6 * (i - 1) .. 8 + 6 * (i - 1)], for each policy i:
--          algorithm   sliding_log | compact_log | sliding_counter | fixed_window
--                      | token_bucket | concurrency
--          limit       units per window, integer >= 1
--          window_ms   window length in milliseconds
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
--          allowed (1/0), count x 1000, remaining, retry_ms, reset_ms, blocked_us}
-- blocked_us is how long, from now, the key denies every request of this cost or more
-- whatever happens elsewhere (only admissions consume, only time frees): a denied
-- policy's retry time (0 for a cost it can never grant), or
-- for a policy that recorded this request with its last unit of quota, the time until the
-- next one of cost 1 fits; else 0. Workers answer such requests themselves until then.
-- A concurrency policy's units come back with responses, not with time: its blocked_us
-- is always 0.

-- One policy's check, or the denial of a cost it can never grant.
local function check_policy(algorithm, key, limit, window_us, now_us, burst, cost)
  if cost > (algorithm.bursts and burst or limit) then
    local r = algorithm.check(key, limit, window_us, now_us, 1, burst)
    return {
      allowed = false, count = r.count, remaining = 0, retry_us = window_us,
      reset_us = window_us, oversized = true,
    }
  end
  return algorithm.check(key, limit, window_us, now_us, cost, burst)
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
    local limit, window_us = tonumber(ARGV[4]), tonumber(ARGV[5]) * 1000
    local burst, cost = tonumber(ARGV[7]), tonumber(ARGV[8])
    local r = check_policy(algorithm, KEYS[1], limit, window_us, now_us, burst, cost)
    local allowed = r.allowed
    local blocked_us = 0
    if not allowed then
      if not r.oversized then
        blocked_us = math.floor(r.retry_us)
      end
    elseif ARGV[2] == '1' then
      algorithm.record(KEYS[1], limit, window_us, now_us, r, cost, burst)
      blocked_us = math.floor(r.full_us)
    end
    if algorithm.released then
      blocked_us = 0
    end
    return {
      (allowed or ARGV[6] ~= '1') and 1 or 0, now_us, allowed and 1 or 0,
      math.floor(r.count * 1000 + 0.5), r.remaining, math.ceil(r.retry_us / 1000),
      math.ceil(r.reset_us / 1000), blocked_us,
    }
  end

  local algorithms, results = {}, {}
  local admitted = true
  for i = 1, count do
    local base = 6 * i - 3
    local algorithm = ALGORITHMS[ARGV[base]]
    if not algorithm then
      return redis.error_reply('ratelimits: unknown algorithm ' .. tostring(ARGV[base]))
    end
    local result = check_policy(
      algorithm, KEYS[i], tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]) * 1000, now_us,
      tonumber(ARGV[base + 4]), tonumber(ARGV[base + 5]))
    algorithms[i], results[i] = algorithm, result
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
      if not r.oversized then
        blocked_us = math.floor(r.retry_us)
      end
    elseif recorded then
      local base = 6 * i - 3
      algorithms[i].record(
        KEYS[i], tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]) * 1000, now_us, r,
        tonumber(ARGV[base + 5]), tonumber(ARGV[base + 4]))
      blocked_us = math.floor(r.full_us)
    end
    if algorithms[i].released then
      blocked_us = 0
    end
    reply[n + 1] = allowed and 1 or 0
    reply[n + 2] = math.floor(r.count * 1000 + 0.5)
    reply[n + 3] = r.remaining
    reply[n + 4] = math.ceil(r.retry_us / 1000)
    reply[n + 5] = math.ceil(r.reset_us / 1000)
    reply[n + 6] = blocked_us
    n = n + 6
  end
  return reply
end
