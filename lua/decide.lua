-- decide: one request against every policy that matches it, in one call, all or nothing.
--
-- KEYS[i]  the key of policy i, i = 1..n (all in one hash slot on a cluster)
-- ARGV[1]  now in microseconds, or "" to use the Redis server's clock (TIME)
-- ARGV[2]  "1" to record an admitted request, "0" to only look (nothing is written)
-- ARGV[3 + 4 * (i - 1) .. 6 + 4 * (i - 1)], for each policy i:
--          algorithm   sliding_log | compact_log | sliding_counter | fixed_window
--          limit       requests per window, integer >= 1
--          window_ms   window length in milliseconds
--          enforce     "1" for an enforcing policy, "0" for a shadow one
--
-- Every policy is checked first, without writing. The request is admitted when no
-- enforcing policy denies it; only then, and only when ARGV[2] is "1", is it recorded,
-- in every policy that allowed it. A request denied by one policy consumes nothing
-- from the others.
--
-- Returns {admitted, now_us, then for each policy i:
--          allowed (1/0), count x 1000, remaining, retry_ms, reset_ms, blocked_us}
-- blocked_us is how long, from now, the key denies every request whatever happens
-- elsewhere (only admissions consume, only time frees): a denied policy's retry time, or
-- for a policy that recorded this request with its last unit of quota, the time until the
-- next one fits; else 0. Workers answer such requests themselves until then.

local function decide(KEYS, ARGV)
  local now_us
  if ARGV[1] ~= '' then
    now_us = tonumber(ARGV[1])
  else
    local time = redis.call('TIME')
    now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
  end
  local record = ARGV[2] == '1'

  local checks = {}
  local admitted = true
  for i = 1, #KEYS do
    local base = 3 + 4 * (i - 1)
    local algorithm = ALGORITHMS[ARGV[base]]
    if not algorithm then
      return redis.error_reply('ratelimits: unknown algorithm ' .. tostring(ARGV[base]))
    end
    local limit = tonumber(ARGV[base + 1])
    local window_us = tonumber(ARGV[base + 2]) * 1000
    local result = algorithm.check(KEYS[i], limit, window_us, now_us)
    checks[i] = {algorithm = algorithm, limit = limit, window_us = window_us, result = result}
    if not result.allowed and ARGV[base + 3] == '1' then
      admitted = false
    end
  end

  local reply = {admitted and 1 or 0, now_us}
  for i = 1, #KEYS do
    local c = checks[i]
    local r = c.result
    if admitted and record and r.allowed then
      c.algorithm.record(KEYS[i], c.limit, c.window_us, now_us, r)
    end
    reply[#reply + 1] = r.allowed and 1 or 0
    reply[#reply + 1] = math.floor(r.count * 1000 + 0.5)
    reply[#reply + 1] = r.remaining
    reply[#reply + 1] = ceil_div(r.retry_us, 1000)
    reply[#reply + 1] = ceil_div(r.reset_us, 1000)
    if not r.allowed then
      reply[#reply + 1] = math.floor(r.retry_us)
    elseif admitted and record then
      reply[#reply + 1] = math.floor(r.full_us)
    else
      reply[#reply + 1] = 0
    end
  end
  return reply
end
