-- sliding_log: the exact sliding window log, on a sorted set of weighted entries.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a sorted set with one member per
--       admitted request, whatever its cost, "<start>:<cost>" (the start's digits after
--       a letter counting them: "a0:1", "b12:4"), scored by its admission
--       time in microseconds (see the weighted log below: start is the units
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

-- The weighted log: one member per admitted request, whatever its cost, named
-- "<start>:<cost>" (see wlog_member) and scored by its admission time. Positions are
-- contiguous units in time order: the request covers positions start .. start + cost - 1,
-- the next one starts at start + cost. Times never decrease along the set (a clock that
-- steps back is stored as the newest time seen), so rank order is both time order and
-- position order, and the units between two entries are a difference of positions: a
-- count, the oldest entry in the window and the entry where k units have left are each
-- O(log n) commands (ZRANGE by rank, ZRANGEBYSCORE ... LIMIT 0 1), never a walk.
-- Removing a request (give_back) renumbers the entries admitted after it, keeping the
-- positions contiguous: O(m log n) for m such entries (usually none).

-- start, cost of a member; nil for a member no release of this code writes.
local function wlog_entry(member)
  local start, cost = string.match(member, '^%l(%d+):(%d+)$')
  if not start then
    return nil
  end
  return tonumber(start), tonumber(cost)
end

-- Members of one time sort by name: the start's digits follow a letter saying how many
-- there are ("a7", "b12"), so that order is the positions' order.
local function wlog_member(start, cost)
  local digits = int(start)
  return string.char(96 + #digits) .. digits .. ':' .. int(cost)
end

-- Entries read at the head of a log, oldest first, in one ZRANGE: a log of no more is
-- read whole (its newest entry is then in memory too), and in a longer one the oldest
-- entry in the window is found there when fewer than this many left the window since
-- the last admission (which removes them), as it is for a steady client. Each entry
-- read costs Redis about 0.5 µs (its score formatted, the reply made Lua strings): with
-- 40 entries in its window, a steady client cost 17.6 to 19.1 µs per decision with a
-- head of 16 and 11.9 to 12.4 µs with 2.
local WLOG_HEAD = 2

-- The oldest entry of head (ZRANGE ... WITHSCORES from rank 0) stored after after_us:
-- its rank, member and time; nil when every entry of head is older.
local function wlog_first_in(head, after_us)
  for rank = 0, #head / 2 - 1 do
    local at = tonumber(head[2 * rank + 2])
    if at > after_us then
      return rank, head[2 * rank + 1], at
    end
  end
  return nil
end

local function wlog_bad(key)
  error('ratelimits: ' .. key .. ' does not hold a sliding_log')
end

-- The log's shape seen from after_us: a table with
--   last_end, last_us  the position after the newest entry and its time
--   count              units in entries after after_us
--   first, first_start, first_end, first_us   the oldest such entry (when count > 0)
--   head               the entries read at the head (ZRANGE ... WITHSCORES)
--   first_rank         the rank of the oldest entry in the window (the number of entries
--                      that left it) when it was found in head, else nil
-- or nil for an empty key. A member that is no weighted entry is an error.
local function wlog_read(key, after_us)
  local head = redis.call('ZRANGE', key, 0, WLOG_HEAD - 1, 'WITHSCORES')
  if not head[1] then
    return nil
  end
  local newest_member, newest_us = head[#head - 1], head[#head]
  if #head == 2 * WLOG_HEAD then -- a longer log: its newest entry is one more read
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    newest_member, newest_us = newest[1], newest[2]
  end
  local last_start, last_cost = wlog_entry(newest_member)
  if not last_start then
    wlog_bad(key)
  end
  local rank, member, at = wlog_first_in(head, after_us)
  if not rank and #head < 2 * WLOG_HEAD then
    rank = #head / 2 -- read whole, and every entry left the window
  elseif not rank then
    local first = redis.call(
      'ZRANGEBYSCORE', key, '(' .. int(after_us), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    member, at = first[1], tonumber(first[2])
  end
  local first_start, first_cost = 0, 0 -- (no entry in the window: count 0)
  if member then
    first_start, first_cost = wlog_entry(member)
    if not first_start then
      wlog_bad(key)
    end
  end
  local last_end = last_start + last_cost
  return {
    last_end = last_end, last_us = tonumber(newest_us),
    count = member and last_end - first_start or 0, first = member or false,
    first_start = first_start, first_end = first_start + first_cost, first_us = at or 0,
    first_rank = rank, head = head,
  }
end

-- The time of the entry holding the k-th unit after after_us (1 <= k <= log.count): the
-- first entry whose end reaches first_start + k, by binary search over ranks.
local function wlog_time_of_unit(key, log, k)
  local target = log.first_start + k
  if log.first_end >= target then
    return log.first_us
  end
  local low = nil
  if log.first_rank then -- the entries read at the head are searched in memory first
    local read = #log.head / 2
    for rank = log.first_rank + 1, read - 1 do
      local start, cost = wlog_entry(log.head[2 * rank + 1])
      if start + cost >= target then
        return tonumber(log.head[2 * rank + 2])
      end
    end
    low = read -- (a log read whole never gets here: its newest entry ends at last_end)
  end
  low = low or redis.call('ZRANK', key, log.first) + 1
  local high = redis.call('ZCARD', key) - 1 -- the newest, whose end is last_end >= target
  while low < high do
    local middle = math.floor((low + high) / 2)
    local start, cost = wlog_entry(redis.call('ZRANGE', key, middle, middle)[1])
    if start + cost >= target then
      high = middle
    else
      low = middle + 1
    end
  end
  return tonumber(redis.call('ZRANGE', key, low, low, 'WITHSCORES')[2])
end

-- Expired entries one admission removes at most: a log whose many entries left the
-- window at once is trimmed over several admissions, never in one long call (counts read
-- positions from the first entry in the window, so entries left behind change nothing).
local WLOG_TRIM = 256

-- Appends a request of cost units at now_us after the log read as log (nil: empty),
-- first dropping (up to WLOG_TRIM of) what left the window; the key expires when the
-- entry leaves.
local function wlog_add(key, log, window_us, now_us, cost)
  local at, start = now_us, 0
  if log then
    at, start = math.max(now_us, log.last_us), log.last_end
    local expired = log.first_rank -- known when found at the head
    if expired == nil and log.first then
      expired = redis.call('ZRANK', key, log.first)
    elseif expired == nil then
      expired = redis.call('ZCARD', key)
    end
    if expired > 0 then
      redis.call('ZREMRANGEBYRANK', key, 0, math.min(expired, WLOG_TRIM) - 1)
    end
  end
  redis.call('ZADD', key, int(at), wlog_member(start, cost))
  redis.call('PEXPIRE', key, ceil_div(at + window_us - now_us, 1000))
end

-- Removes the request of cost units stored at at_us (any of them, when several of that
-- cost share the time: they are alike) and renumbers the entries after it. Nothing when
-- none is found (it left the window, or was stored at a later time by a clock that had
-- stepped back: it then stays until it leaves, which errs towards denying).
local function wlog_remove(key, at_us, cost)
  local found = redis.call('ZRANGEBYSCORE', key, int(at_us), int(at_us), 'LIMIT', 0, 64)
  for _, member in ipairs(found) do
    local _, stored = wlog_entry(member)
    if stored == cost then
      local rank = redis.call('ZRANK', key, member)
      local after = redis.call('ZRANGE', key, rank + 1, -1, 'WITHSCORES')
      local old, new = {member}, {}
      for i = 1, #after, 2 do
        local start, weight = wlog_entry(after[i])
        old[#old + 1] = after[i]
        new[#new + 1], new[#new + 2] = after[i + 1], wlog_member(start - cost, weight)
      end
      zcall('ZREM', key, old)
      zcall('ZADD', key, new)
      return
    end
  end
end

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
