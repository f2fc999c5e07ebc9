-- concurrency: how many requests of one client are in progress at once.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a sorted set of leases, one member
--       per request in progress whatever its cost, scored by when its lease ends, start
--       + window, in microseconds, and named "<start_us>-<n>" for a request of one unit
--       or "<start_us>-<n>x<cost>" for one of more (n: the units in progress before it);
--       plus the member "#", scored minus the units all its leases hold (a running
--       total, so counting never reads the leases).
-- ARGV  the policy's slots in decide.lua's ARGV: limit (units in progress at once), the
--       lease in milliseconds, cost; plus now_us from ARGV[1] (or Redis TIME).
--
-- A request takes cost units when admitted and gives them back when its response is
-- done (give_back, sent by the worker after the response). A lease that is never given
-- back (a worker killed mid-request) ends by itself: check() counts the total less the
-- ended leases still stored, and never writes; record() removes those ended leases and
-- writes the new total (up to LEASES_TRIM a call: each lease is added once and removed
-- once, so this is amortised O(log n) a request). The key expires with its last lease.
--
-- Lease end times are all positive and the total's score is zero or negative, so the
-- ended leases are exactly the scores in (0, now]. A key without "#" holds no lease: every
-- write of a lease writes the total with it.
--
-- Units free when responses finish, not at a time Redis could compute, so a denied
-- request is told to retry after a short, fixed time (CONCURRENCY_RETRY_US), and
-- released = true keeps workers from remembering the denial.

local CONCURRENCY_RETRY_US = 1000000
local LEASES_TOTAL = '#'
-- Ended leases one call reads and removes at most (more, as when many workers died at
-- once, are removed over the next admissions and counted until then: that errs towards
-- denying, for one lease at most, when the key expires).
local LEASES_TRIM = 1024

-- The units of one lease (1 for a member without "x<cost>").
local function lease_units(member)
  local cost = string.match(member, 'x(%d+)$')
  return cost and tonumber(cost) or 1
end

-- Writes the total and returns it; with no lease left the key is deleted (whatever the
-- total said) and the total is 0.
local function leases_store(key, total)
  redis.call('ZADD', key, -math.max(total, 0), LEASES_TOTAL)
  if redis.call('ZCARD', key) == 1 then
    redis.call('DEL', key)
    return 0
  end
  return math.max(total, 0)
end

-- Units held by leases not yet ended, read without writing: the total, minus the ended
-- leases still stored (up to LEASES_TRIM of them; record() removes them). Also returns
-- those ended leases.
local function leases_held(key, now_us)
  local stored = redis.call('ZSCORE', key, LEASES_TOTAL)
  local total = stored and -tonumber(stored) or 0
  local ended = redis.call('ZRANGEBYSCORE', key, '(0', int(now_us), 'LIMIT', 0, LEASES_TRIM)
  for _, member in ipairs(ended) do
    total = total - lease_units(member)
  end
  return math.max(total, 0), ended
end

local function lease_name(at_us, before, cost)
  if cost == 1 then
    return int(at_us) .. '-' .. int(before)
  end
  return int(at_us) .. '-' .. int(before) .. 'x' .. int(cost)
end

ALGORITHMS.concurrency = {
  released = true,

  check = function(key, limit, window_us, now_us, cost)
    local count, ended = leases_held(key, now_us)
    if count + cost <= limit then
      return {
        allowed = true, count = count, remaining = limit - count - cost, retry_us = 0,
        reset_us = CONCURRENCY_RETRY_US, full_us = 0, ended = ended,
      }
    end
    return {
      allowed = false, count = count, remaining = 0, retry_us = CONCURRENCY_RETRY_US,
      reset_us = CONCURRENCY_RETRY_US,
    }
  end,

  record = function(key, limit, window_us, now_us, state, cost)
    if #state.ended > 0 then
      zcall('ZREM', key, state.ended)
    end
    redis.call('ZADD', key, int(now_us + window_us), lease_name(now_us, state.count, cost),
      -(state.count + cost), LEASES_TOTAL)
    -- The key lives as long as its last lease (a lease made before the window was
    -- shortened may end after this one).
    local lease_ms = ceil_div(window_us, 1000)
    if redis.call('PTTL', key) < lease_ms then
      redis.call('PEXPIRE', key, lease_ms)
    end
  end,

  -- The lease is named by its time and the units in progress before it (the mark).
  give_back = function(key, limit, window_us, at_us, mark, cost)
    if redis.call('ZREM', key, lease_name(at_us, mark, cost)) == 1 then
      local stored = redis.call('ZSCORE', key, LEASES_TOTAL)
      if stored then
        leases_store(key, -tonumber(stored) - cost)
      end
    end
  end,
}
