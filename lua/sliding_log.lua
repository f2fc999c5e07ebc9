-- sliding_log: the exact sliding window log, on a sorted set.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a sorted set with one member
--       per admitted request, scored by its admission time in microseconds.
-- ARGV  the policy's slots in decide.lua's ARGV: limit, window in milliseconds, cost;
--       plus now_us from ARGV[1] (or Redis TIME).
--
-- An admission at time t occupies a slot during [t, t + window); a request of cost n
-- occupies n slots (n members, all scored t). Only admitted
-- requests are stored, so a denied flood costs no memory. check() counts with ZCOUNT
-- and never writes; record() prunes what left the window, adds the request, and sets
-- the TTL to the window (the newest entry is the last to leave). give_back() removes a
-- request's members again.

ALGORITHMS.sliding_log = {
  check = function(key, limit, window_us, now_us, cost)
    local start = '(' .. int(now_us - window_us)
    local count = redis.call('ZCOUNT', key, start, '+inf')
    if count + cost <= limit then
      local oldest = redis.call('ZRANGEBYSCORE', key, start, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      local reset_us = window_us
      if oldest[2] then
        reset_us = tonumber(oldest[2]) + window_us - now_us
      end
      local remaining = limit - count - cost
      return {
        allowed = true, count = count, remaining = remaining, retry_us = 0,
        reset_us = reset_us,
        -- With this request the log is full until its oldest entry leaves.
        full_us = remaining == 0 and reset_us or 0,
      }
    end
    -- The request fits once the (count + cost - limit)th oldest entry has left.
    local entry = redis.call(
      'ZRANGEBYSCORE', key, start, '+inf', 'WITHSCORES', 'LIMIT', count + cost - limit - 1, 1)
    local retry_us = tonumber(entry[2]) + window_us - now_us
    return {
      allowed = false, count = count, remaining = 0, retry_us = retry_us, reset_us = retry_us,
    }
  end,

  record = function(key, limit, window_us, now_us, state, cost)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now_us - window_us))
    -- The count before each unit makes its member unique at one timestamp.
    local at = int(now_us)
    if cost == 1 then
      redis.call('ZADD', key, at, at .. '-' .. state.count)
    else
      add_units(key, at, at, state.count, cost)
    end
    redis.call('PEXPIRE', key, ceil_div(window_us, 1000))
  end,

  -- The request's members are named by its time and the count before it.
  give_back = function(key, limit, window_us, at_us, mark, cost)
    remove_units(key, int(at_us), mark, cost)
  end,
}
