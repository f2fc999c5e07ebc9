-- fixed_window: one counter per clock-aligned window, or per calendar period, on a hash.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a hash with fields
--         w  index of the window the count belongs to (floor(now / window)), or for a
--            calendar period its start in microseconds (see period_of in prelude.lua)
--         c  requests admitted in window w
-- ARGV  the policy's slots in decide.lua's ARGV: limit, window in milliseconds, cost;
--       plus now_us from ARGV[1] (or Redis TIME). A request of cost n adds n to c.
--
-- A count from an older window is ignored, and the key expires at the end of its
-- window. Cheap, but a client can send the limit just before a boundary and the
-- limit again just after it: up to 2 x limit within one window's length.

ALGORITHMS.fixed_window = {
  calendar = true, -- its window may be a calendar period (see window_of in prelude.lua)

  check = function(key, limit, window_us, now_us, cost)
    local index, ends_us = period_of(window_us, now_us)
    local stored = redis.call('HMGET', key, 'w', 'c')
    local stored_index = tonumber(stored[1])
    local count = 0
    if stored_index == index then
      count = tonumber(stored[2]) or 0
    end
    local reset_us = ends_us - now_us
    if count + cost <= limit then
      local remaining = limit - count - cost
      return {
        allowed = true, count = count, remaining = remaining, retry_us = 0,
        reset_us = reset_us,
        -- With this request the window is full until it ends.
        full_us = remaining == 0 and reset_us or 0,
        index = index, stored_index = stored_index,
      }
    end
    return {
      allowed = false, count = count, remaining = 0, retry_us = reset_us, reset_us = reset_us,
      index = index, stored_index = stored_index,
    }
  end,

  record = function(key, limit, window_us, now_us, state, cost)
    if state.stored_index == state.index then
      -- The key already expires when this window ends: set with the window's first count.
      redis.call('HINCRBY', key, 'c', cost)
    else
      redis.call('HSET', key, 'w', int(state.index), 'c', cost)
      redis.call('PEXPIRE', key, ceil_div(state.reset_us, 1000))
    end
  end,

  -- The request counted in the window of at_us; once that window ended, nothing is left.
  give_back = function(key, limit, window_us, at_us, mark, cost)
    local stored = redis.call('HMGET', key, 'w', 'c')
    if tonumber(stored[1]) == period_of(window_us, at_us) then
      redis.call('HSET', key, 'c', math.max(0, (tonumber(stored[2]) or 0) - cost))
    end
  end,
}
