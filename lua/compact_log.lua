-- compact_log: the exact sliding window log, in a fixed-width ring in one string.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua): a string of
--         4 bytes     head, big-endian: the slot of the oldest entry
--         8 bytes x S the ring: admission times in microseconds (big-endian doubles,
--                     exact below 2^53), oldest at head, newest just before it
--       S is at most the limit: a client costs 8 bytes per admission in the window,
--       about 8 KB at limit 1000 (a sorted set costs about 118 KB there).
-- ARGV  the policy's slots in decide.lua's ARGV: limit, window in milliseconds, cost;
--       plus now_us from ARGV[1] (or Redis TIME). A request of cost n is n entries.
--
-- It decides exactly as sliding_log does: a request is admitted when fewer than limit
-- admissions lie in (now - window, now], and the ring always holds every admission in
-- that interval. Entries are in time order (a clock that steps back is stored as the
-- newest time seen), so the first entry inside the window is found by binary search.
-- record() rewrites the string, in one SET with the key's expiry, with the entries still
-- in the window plus the new one, from slot 0: the ring grows with use up to the limit,
-- and a changed limit resizes it on the next admission. (A ring with another head, as
-- earlier releases wrote, reads the same.) Only admitted requests are stored, and the key
-- expires a window after the newest admission.

local RING_HEADER = 4
local RING_SLOT = 8
-- The header of a ring written from slot 0.
local RING_START = '\0\0\0\0'

local function ring_read(key)
  local blob = redis.call('GET', key)
  if not blob then
    return nil, 0, 0
  end
  local size = (#blob - RING_HEADER) / RING_SLOT
  if size < 1 or size ~= math.floor(size) then
    error('ratelimits: ' .. key .. ' does not hold a compact_log ring')
  end
  return blob, size, struct.unpack('>I4', blob, 1)
end

-- Entry k of the ring, oldest first (k = 0 .. size - 1).
local function ring_entry(blob, size, head, k)
  return struct.unpack('>d', blob, RING_HEADER + 1 + RING_SLOT * ((head + k) % size))
end

-- The first k whose entry is after `after` (size when none is).
local function ring_first_after(blob, size, head, after)
  local low, high = 0, size
  while low < high do
    local middle = math.floor((low + high) / 2)
    if ring_entry(blob, size, head, middle) > after then
      high = middle
    else
      low = middle + 1
    end
  end
  return low
end

-- The bytes of entries from .. to - 1, oldest first (at most two slices of the blob).
local function ring_span(blob, size, head, from, to)
  local count = to - from
  if count <= 0 then
    return ''
  end
  local start = (head + from) % size
  local function bytes(from, to) -- slots from .. to - 1
    return string.sub(blob, RING_HEADER + 1 + RING_SLOT * from, RING_HEADER + RING_SLOT * to)
  end
  if start + count <= size then
    return bytes(start, start + count)
  end
  return bytes(start, size) .. bytes(0, start + count - size)
end

-- The bytes of entries first .. size - 1.
local function ring_slice(blob, size, head, first)
  return ring_span(blob, size, head, first, size)
end

ALGORITHMS.compact_log = {
  check = function(key, limit, window_us, now_us, cost)
    local blob, size, head = ring_read(key)
    local first = 0
    if blob then
      first = ring_first_after(blob, size, head, now_us - window_us)
    end
    local count = size - first
    if count + cost <= limit then
      local reset_us = window_us
      if count > 0 then
        reset_us = ring_entry(blob, size, head, first) + window_us - now_us
      end
      local remaining = limit - count - cost
      return {
        allowed = true, count = count, remaining = remaining, retry_us = 0,
        reset_us = reset_us,
        -- With this request the log is full until its oldest entry leaves.
        full_us = remaining == 0 and reset_us or 0,
        blob = blob, size = size, head = head, first = first,
      }
    end
    -- The request fits once the (count + cost - limit)th oldest entry has left.
    local retry_us =
      ring_entry(blob, size, head, first + count + cost - limit - 1) + window_us - now_us
    return {
      allowed = false, count = count, remaining = 0, retry_us = retry_us, reset_us = retry_us,
    }
  end,

  record = function(key, limit, window_us, now_us, state, cost)
    local blob, size, head = state.blob, state.size, state.head
    local at = now_us
    if size > 0 then
      at = math.max(now_us, ring_entry(blob, size, head, size - 1))
    end
    local kept = ''
    if blob then
      kept = ring_slice(blob, size, head, state.first)
    end
    -- The entries still in the window, oldest first from slot 0, then this one's cost
    -- entries; the key expires a window after it (one SET: the string and its expiry).
    local added = struct.pack('>d', at)
    if cost > 1 then
      added = string.rep(added, cost)
    end
    redis.call('SET', key, RING_START .. kept .. added, 'PX',
      ceil_div(window_us, 1000))
  end,

  -- The request's entries hold its time (or, after a clock step back, the newest time
  -- before it): the first entries at or after at_us with one value are removed. Were an
  -- older entry to hold a later time, it would go instead, and the newer one stay longer:
  -- that errs towards denying. The key keeps its expiry.
  give_back = function(key, limit, window_us, at_us, mark, cost)
    local blob, size, head = ring_read(key)
    if not blob then
      return
    end
    local first = ring_first_after(blob, size, head, at_us - 1)
    if first >= size then
      return
    end
    local at = ring_entry(blob, size, head, first)
    local last = first + 1
    while last < size and last - first < cost and ring_entry(blob, size, head, last) == at do
      last = last + 1
    end
    local kept = ring_span(blob, size, head, 0, first) .. ring_slice(blob, size, head, last)
    if kept == '' then
      redis.call('DEL', key)
    else
      redis.call('SET', key, RING_START .. kept, 'KEEPTTL')
    end
  end,
}
