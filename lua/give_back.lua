-- give_back: after a response, undo what an admitted request recorded in some of its
-- policies: a concurrency policy's leases, and the units of a policy whose counts say
-- this response does not count (see ratelimits/engine/receipt.py).
--
-- decide(KEYS, ARGV) calls it when ARGV[2] is "2":
-- KEYS[i]  the key of policy i (all in one hash slot on a cluster)
-- ARGV[1]  the request's time in microseconds, as its decide call replied it
-- ARGV[3 + 6 * (i - 1) .. 8 + 6 * (i - 1)], for each policy i, decide's slots with the
--          fourth, enforce, replaced by the mark: the count that call replied for it:
--          algorithm, limit, window_ms, mark, burst, cost; or "r" for a sign-in policy
--          that resets on success: its key and its lock are deleted (the account's
--          failures cleared)
--
-- Returns the number of policies given back. Only what the request stored is removed;
-- what has left its window since is not touched, and nothing goes below zero.

local function give_back(KEYS, ARGV)
  local at_us = tonumber(ARGV[1])
  local time = redis.call('TIME')
  local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
  for i = 1, #KEYS do
    local base = 6 * i - 3
    local algorithm = ALGORITHMS[ARGV[base]]
    if not algorithm then
      return redis.error_reply('ratelimits: unknown algorithm ' .. tostring(ARGV[base]))
    end
    if ARGV[base + 3] == 'r' then
      redis.call('DEL', KEYS[i], lock_key(KEYS[i]))
    else
      algorithm.give_back(
        KEYS[i], tonumber(ARGV[base + 1]), (window_of(ARGV[base + 2])), at_us,
        tonumber(ARGV[base + 3]), tonumber(ARGV[base + 5]), tonumber(ARGV[base + 4]), now_us)
    end
  end
  return #KEYS
end
