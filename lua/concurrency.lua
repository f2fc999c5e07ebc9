-- concurrency: how many requests of one client are in progress at once.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a sorted set of leases, one member
--       per unit in progress, named "<start_us>-<n>" (n: the units in progress before
--       it) and scored by when its lease ends, start + window, in microseconds.
-- ARGV  the policy's slots in decide.lua's ARGV: limit (units in progress at once), the
--       lease in milliseconds, cost; plus now_us from ARGV[1] (or Redis TIME).
--
-- A request takes cost units when admitted and gives them back when its response is
-- done (give_back, sent by the worker after the response). A lease that is never given
-- back (a worker killed mid-request) ends by itself: check() counts only leases not yet
-- ended, and record() removes the ended ones. The key expires with its last lease.
--
-- Units free when responses finish, not at a time Redis could compute, so a denied
-- request is told to retry after a short, fixed time (CONCURRENCY_RETRY_US), and
-- released = true keeps workers from remembering the denial.

local CONCURRENCY_RETRY_US = 1000000

ALGORITHMS.concurrency = {
  released = true,

  check = function(key, limit, window_us, now_us, cost)
    local count = redis.call('ZCOUNT', key, '(' .. int(now_us), '+inf')
    if count + cost <= limit then
      return {
        allowed = true, count = count, remaining = limit - count - cost, retry_us = 0,
        reset_us = CONCURRENCY_RETRY_US, full_us = 0,
      }
    end
    return {
      allowed = false, count = count, remaining = 0, retry_us = CONCURRENCY_RETRY_US,
      reset_us = CONCURRENCY_RETRY_US,
    }
  end,

  record = function(key, limit, window_us, now_us, state, cost)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now_us))
    add_units(key, int(now_us + window_us), int(now_us), state.count, cost)
    -- The key lives as long as its last lease (a lease made before the window was
    -- shortened may end after this one).
    local lease_ms = ceil_div(window_us, 1000)
    if redis.call('PTTL', key) < lease_ms then
      redis.call('PEXPIRE', key, lease_ms)
    end
  end,

  give_back = function(key, limit, window_us, at_us, mark, cost)
    remove_units(key, int(at_us), mark, cost)
  end,
}
