-- token_bucket: the generic cell rate algorithm (GCRA), one number per client.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a string holding the theoretical
--       arrival time (TAT) in microseconds: when the bucket will be empty again if
--       nothing more is admitted. It expires then (SET ... PX), so an idle client costs
--       nothing, and a busy one one small string.
-- ARGV  the policy's slots in decide.lua's ARGV: limit, window in milliseconds, burst,
--       cost; plus now_us from ARGV[1] (or Redis TIME).
--
-- limit per window is the sustained rate: one unit frees every emission interval
-- T = window / limit. burst is how many units may be spent at once. The bucket's fill is
-- measured in time, level = max(TAT - now, 0): each unit spent adds T, time drains it.
-- A request of cost n gives new_tat = max(TAT, now) + n * T and is admitted iff
--   new_tat - now <= burst * T
-- (the usual GCRA tolerance is tau = (burst - 1) * T, and new_tat - T - now <= tau is the
-- same test), so exactly burst units pass at once from an empty bucket, and after that
-- one every T. Comparisons allow 1 microsecond for the rounding of doubles (a stored
-- TAT near 1.8e15 is exact to 0.25 us).
--
-- remaining  units that could still pass now after this request:
--            floor((burst * T - (new_tat - now)) / T)
-- retry_us   for a denied request, exactly when it would fit: new_tat - now - burst * T
-- reset_us   when one more unit frees (remaining grows by one)
-- count      units in the bucket before this request: level / T

local BUCKET_SLACK_US = 1

ALGORITHMS.token_bucket = {
  bursts = true,

  check = function(key, limit, window_us, now_us, cost, burst)
    local interval = window_us / limit
    local capacity = burst * interval
    local level = 0
    local stored = tonumber(redis.call('GET', key))
    if stored and stored > now_us then
      level = stored - now_us
    end
    local after = level + cost * interval
    if after <= capacity + BUCKET_SLACK_US then
      local remaining = math.max(0, math.floor((capacity - after + BUCKET_SLACK_US) / interval))
      -- remaining grows by one once the level has fallen to (burst - remaining - 1) * T.
      local reset_us = math.max(0, after - (burst - remaining - 1) * interval)
      return {
        allowed = true, count = level / interval, remaining = remaining, retry_us = 0,
        reset_us = reset_us, full_us = remaining == 0 and reset_us or 0,
        tat = now_us + after, ttl_us = after,
      }
    end
    local free = math.max(0, math.floor((capacity - level + BUCKET_SLACK_US) / interval))
    local retry_us = after - capacity
    return {
      allowed = false, count = level / interval, remaining = 0, retry_us = retry_us,
      reset_us = math.max(0, level - (burst - free - 1) * interval),
    }
  end,

  record = function(key, limit, window_us, now_us, state)
    redis.call('SET', key, string.format('%.17g', state.tat), 'PX',
      math.max(1, math.ceil(state.ttl_us / 1000)))
  end,

  -- The units drain again: the TAT moves back by cost intervals, no earlier than now
  -- (a bucket that empties is deleted).
  give_back = function(key, limit, window_us, at_us, mark, cost, burst, now_us)
    local stored = tonumber(redis.call('GET', key))
    if not stored then
      return
    end
    local tat = stored - cost * window_us / limit
    if tat <= now_us then
      redis.call('DEL', key)
    else
      redis.call('SET', key, string.format('%.17g', tat), 'PX',
        math.max(1, math.ceil((tat - now_us) / 1000)))
    end
  end,
}
