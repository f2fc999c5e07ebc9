-- sliding_counter: the sliding window counter, on a hash of two clock-aligned windows.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a hash with fields
--         w  index of the current window (floor(now / window))
--         c  requests admitted in window w
--         p  requests admitted in window w - 1
-- ARGV  the policy's slots in decide.lua's ARGV: limit, window in milliseconds;
--       plus now_us from ARGV[1] (or Redis TIME).
--
-- estimate = p * (window - elapsed) / window + c, with elapsed the time since the
-- current window began. A request is admitted when estimate + 1 <= limit, so the
-- estimate never passes the limit. retry_us and reset_us solve the same formula for
-- the moment the estimate has fallen far enough. The key lives until the end of the
-- window after the current one, when its counts stop mattering.

local function counter_state(key, window_us, now_us)
  local index = math.floor(now_us / window_us)
  local stored = redis.call('HMGET', key, 'w', 'c', 'p')
  local stored_index = tonumber(stored[1])
  local current, previous = 0, 0
  if stored_index == index then
    current, previous = tonumber(stored[2]) or 0, tonumber(stored[3]) or 0
  elseif stored_index == index - 1 then
    previous = tonumber(stored[2]) or 0
  end
  return index, now_us - index * window_us, current, previous, stored_index
end

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
  check = function(key, limit, window_us, now_us)
    local index, elapsed, current, previous, stored_index = counter_state(key, window_us, now_us)
    local estimate = previous * (window_us - elapsed) / window_us + current
    local result = {
      count = estimate, index = index, current = current, previous = previous,
      stored_index = stored_index,
    }
    if estimate + 1 <= limit + 1e-9 then
      result.allowed = true
      result.remaining = math.max(0, math.floor(limit - estimate - 1 + 1e-9))
      result.retry_us = 0
      result.reset_us = counter_wait(previous, current + 1, elapsed, window_us, estimate)
      -- With this request counted, the next one waits for the estimate to fall to limit - 1.
      result.full_us = 0
      if result.remaining == 0 then
        result.full_us = counter_wait(previous, current + 1, elapsed, window_us, limit - 1)
      end
    else
      result.allowed = false
      result.remaining = 0
      result.retry_us = counter_wait(previous, current, elapsed, window_us, limit - 1)
      result.reset_us = result.retry_us
    end
    return result
  end,

  record = function(key, limit, window_us, now_us, state)
    if state.stored_index == state.index then
      -- The key's expiry depends only on the window index: it was set with its first count.
      redis.call('HINCRBY', key, 'c', 1)
    else
      redis.call('HSET', key, 'w', state.index, 'c', 1, 'p', state.previous)
      redis.call('PEXPIRE', key, ceil_div((state.index + 2) * window_us - now_us, 1000))
    end
  end,
}
