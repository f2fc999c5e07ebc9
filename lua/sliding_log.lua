-- sliding_log: the exact sliding window log, on a sorted set.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a sorted set with one member
--       per admitted request, scored by its admission time in microseconds.
-- ARGV  the policy's slots in decide.lua's ARGV: limit, window in milliseconds;
--       plus now_us from ARGV[1] (or Redis TIME).
--
-- An admission at time t occupies a slot during [t, t + window). Only admitted
-- requests are stored, so a denied flood costs no memory. check() counts with ZCOUNT
-- and never writes; record() prunes what left the window, adds the request, and sets
-- the TTL to the window (the newest entry is the last to leave).

ALGORITHMS.sliding_log = {
  check = function(key, limit, window_us, now_us)
    local start = '(' .. int(now_us - window_us)
    local count = redis.call('ZCOUNT', key, start, '+inf')
    local result = {count = count}
    if count < limit then
      local oldest = redis.call('ZRANGEBYSCORE', key, start, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      result.allowed = true
      result.remaining = limit - count - 1
      result.retry_us = 0
      if oldest[2] then
        result.reset_us = tonumber(oldest[2]) + window_us - now_us
      else
        result.reset_us = window_us
      end
      -- With this request the log is full until its oldest entry leaves.
      result.full_us = result.remaining == 0 and result.reset_us or 0
    else
      -- The request fits once the (count - limit + 1)th oldest entry has left.
      local entry = redis.call(
        'ZRANGEBYSCORE', key, start, '+inf', 'WITHSCORES', 'LIMIT', count - limit, 1)
      result.allowed = false
      result.remaining = 0
      result.retry_us = tonumber(entry[2]) + window_us - now_us
      result.reset_us = result.retry_us
    end
    return result
  end,

  record = function(key, limit, window_us, now_us, state)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now_us - window_us))
    -- The count before this request makes the member unique at one timestamp.
    redis.call('ZADD', key, int(now_us), int(now_us) .. '-' .. state.count)
    redis.call('PEXPIRE', key, ceil_div(window_us, 1000))
  end,
}
