-- sliding_counter: the sliding window counter, on a hash of two clock-aligned windows.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a hash with fields
--         w  index of the current window (floor(now / window))
--         c  requests admitted in window w
--         p  requests admitted in window w - 1
-- ARGV  the policy's slots in decide.lua's ARGV: limit, window in milliseconds, cost;
--       plus now_us from ARGV[1] (or Redis TIME).
--
-- estimate = p * (window - elapsed) / window + c, with elapsed the time since the
-- current window began. A request of cost n is admitted when estimate + n <= limit
-- (and adds n to c), so the
-- estimate never passes the limit. retry_us and reset_us solve the same formula for
-- the moment the estimate has fallen far enough. The key lives until the end of the
-- window after the current one, when its counts stop mattering.

-- Microseconds until previous * (window - elapsed) / window + current <= target.
local function counter_wait(previous, current, elapsed, window_us, target)
  if previous * (window_us - elapsed) / window_us + current <= target + 1e-9 then
    return 0
  end
  if current <= target then
    -- Reached inside the current window, as the previous window's weight shrinks.
    return math.ceil(window_us - elapsed - (target - current) * window_us / previous)
  end
  -- After the roll: the current window becomes the previous one and keeps shrinking.
  return math.ceil(window_us - elapsed + window_us - target * window_us / current)
end

ALGORITHMS.sliding_counter = {
  check = function(key, limit, window_us, now_us, cost)
    local index = math.floor(now_us / window_us)
    local stored = redis.call('HMGET', key, 'w', 'c', 'p')
    local stored_index = tonumber(stored[1])
    local current, previous = 0, 0
    if stored_index == index then
      current, previous = tonumber(stored[2]) or 0, tonumber(stored[3]) or 0
    elseif stored_index == index - 1 then
      previous = tonumber(stored[2]) or 0
    end
    local elapsed = now_us - index * window_us
    local estimate = previous * (window_us - elapsed) / window_us + current
    if estimate + cost <= limit + 1e-9 then
      local remaining = math.max(0, math.floor(limit - estimate - cost + 1e-9))
      return {
        allowed = true, count = estimate, remaining = remaining, retry_us = 0,
        reset_us = counter_wait(
          previous, current + cost, elapsed, window_us, estimate + cost - 1),
        -- With this request counted, the next one waits for the estimate to fall to
        -- limit - 1.
        full_us = remaining == 0
          and counter_wait(previous, current + cost, elapsed, window_us, limit - 1) or 0,
        index = index, stored_index = stored_index, previous = previous,
      }
    end
    local retry_us = counter_wait(previous, current, elapsed, window_us, limit - cost)
    return {
      allowed = false, count = estimate, remaining = 0, retry_us = retry_us,
      reset_us = retry_us, index = index, stored_index = stored_index, previous = previous,
    }
  end,

  record = function(key, limit, window_us, now_us, state, cost)
    if state.stored_index == state.index then
      -- The key's expiry depends only on the window index: it was set with its first count.
      redis.call('HINCRBY', key, 'c', cost)
    else
      redis.call('HSET', key, 'w', state.index, 'c', cost, 'p', state.previous)
      redis.call('PEXPIRE', key, ceil_div((state.index + 2) * window_us - now_us, 1000))
    end
  end,

  -- The request counted in the window of at_us: the current one, or the previous one
  -- after a roll. An older window is gone already.
  give_back = function(key, limit, window_us, at_us, mark, cost)
    local index = math.floor(at_us / window_us)
    local stored_index = tonumber(redis.call('HGET', key, 'w'))
    local field
    if stored_index == index then
      field = 'c'
    elseif stored_index == index + 1 then
      field = 'p'
    else
      return
    end
    local counted = tonumber(redis.call('HGET', key, field)) or 0
    redis.call('HSET', key, field, math.max(0, counted - cost))
  end,
}
