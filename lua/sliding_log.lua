-- sliding_log: the exact sliding window log, on a sorted set of weighted entries.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a sorted set with one member per
--       admitted request, whatever its cost, "<start>:<cost>" (the start's digits after
--       a letter counting them: "a0:1", "b12:4"), scored by its admission
--       time in microseconds (see the weighted log in prelude.lua: start is the units
--       stored before it, so the units between two entries are a difference).
-- ARGV  the policy's slots in decide.lua's ARGV: limit, window in milliseconds, cost;
--       plus now_us from ARGV[1] (or Redis TIME).
--
-- An admission at time t of cost n occupies n units during [t, t + window), in ONE
-- member: a request's work and memory in Redis do not grow with its cost. A request is
-- admitted iff the units in (now - window, now] plus its cost fit the limit; a denied one
-- is told exactly when enough units will have left. Only admitted requests are stored,
-- so a denied flood costs no memory. check() reads (O(log n) commands: the two oldest
-- entries, which hold the oldest in the window unless more left it since the last
-- admission, the newest, and for a denial a binary search over ranks) and never writes;
-- record() prunes what left the window, adds the request, and sets the TTL to when it
-- leaves. give_back() removes the request's entry again.

ALGORITHMS.sliding_log = {
  check = function(key, limit, window_us, now_us, cost)
    local log = wlog_read(key, now_us - window_us)
    local count = log and log.count or 0
    if count + cost <= limit then
      local reset_us = window_us
      if count > 0 then
        reset_us = log.first_us + window_us - now_us
      end
      local remaining = limit - count - cost
      return {
        allowed = true, count = count, remaining = remaining, retry_us = 0,
        reset_us = reset_us,
        -- With this request the log is full until its oldest entry leaves.
        full_us = remaining == 0 and reset_us or 0,
        log = log,
      }
    end
    -- The request fits once the (count + cost - limit)th oldest unit has left.
    local retry_us = wlog_time_of_unit(key, log, count + cost - limit) + window_us - now_us
    return {
      allowed = false, count = count, remaining = 0, retry_us = retry_us, reset_us = retry_us,
    }
  end,

  record = function(key, limit, window_us, now_us, state, cost)
    wlog_add(key, state.log, window_us, now_us, cost)
  end,

  -- The request's entry is the one of its cost stored at its time.
  give_back = function(key, limit, window_us, at_us, mark, cost)
    wlog_remove(key, at_us, cost)
  end,
}
