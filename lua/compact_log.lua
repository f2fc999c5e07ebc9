-- compact_log: the exact sliding window log, in a fixed-width ring in one string.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua), "...:ring": a string of
--         16 bytes     header, big-endian: head (uint32, the slot of the oldest entry),
--                      size (uint32, entries held), base (double, the position before
--                      the oldest entry)
--         16 bytes x C the ring of C slots: per admitted request, its time in
--                      microseconds and its end position (doubles, exact below 2^53)
--       Positions count units in time order: an entry of cost n ends n after the one
--       before it (the oldest: after base), so the units between two entries are a
--       difference of positions. A client costs 16 bytes per admitted request in the
--       window, whatever its cost; C grows by doubling, up to the limit (further only
--       when a lowered limit leaves more entries in the window), and never shrinks
--       before the key expires.
-- ARGV  the policy's slots in decide.lua's ARGV: limit, window in milliseconds, cost;
--       plus now_us from ARGV[1] (or Redis TIME).
--
-- It decides exactly as sliding_log does: a request is admitted when the units admitted
-- in (now - window, now] plus its cost fit the limit. Entries are in time order (a clock
-- that steps back is stored as the newest time seen), so the first entry in the window,
-- and the entry where enough units have left for a denied request, are found by binary
-- search. A ring of up to 255 slots (4 KB) is read with one GETRANGE and written with one
-- SET: fewer commands cost less than the bytes copied. Past that, a request reads
-- O(log C) slots (GETRANGE of 16 bytes) and writes one slot and the header (SETRANGE),
-- never the whole string; only growing the ring copies it, O(C) once per doubling. Only admitted requests are stored, and the key expires a
-- window after the newest admission.

local RING_HEADER = 16
local RING_SLOT = 16
-- A ring up to this many bytes (255 slots) is read and written whole.
local RING_WHOLE = RING_HEADER + RING_SLOT * 255

local function ring_bad(key)
  error('ratelimits: ' .. key .. ' does not hold a compact_log ring')
end

-- The ring's header as a table (head, size, base, capacity), or nil for no key. A ring
-- of at most RING_WHOLE bytes is read whole (blob): its slots are then read in memory,
-- and a request writes it back whole, in one SET, instead of a command per slot.
local function ring_open(key)
  local blob = redis.call('GETRANGE', key, 0, RING_WHOLE - 1)
  if blob == '' then
    return nil
  end
  local header, length = blob, #blob
  if length == RING_WHOLE then -- there may be more: read slot by slot
    length = redis.call('STRLEN', key)
    if length > RING_WHOLE then
      blob = nil
    end
  end
  local capacity = (length - RING_HEADER) / RING_SLOT
  if #header < RING_HEADER or capacity < 1 or capacity ~= math.floor(capacity) then
    ring_bad(key)
  end
  local head, size, base = struct.unpack('>I4I4d', header)
  if head >= capacity or size > capacity then
    ring_bad(key)
  end
  return {head = head, size = size, base = base, capacity = capacity, blob = blob}
end

local function ring_header(head, size, base)
  return struct.pack('>I4I4d', head, size, base)
end

-- The byte offset of entry k (0: the oldest).
local function ring_offset(ring, k)
  return RING_HEADER + RING_SLOT * ((ring.head + k) % ring.capacity)
end

-- The time and end position of entry k (from the ring in memory when it was read whole).
local function ring_at(key, ring, k)
  local offset = ring_offset(ring, k)
  if ring.blob then
    local time, ends = struct.unpack('>dd', ring.blob, offset + 1)
    return time, ends
  end
  local time, ends = struct.unpack('>dd', redis.call('GETRANGE', key, offset, offset + RING_SLOT - 1))
  return time, ends
end

-- The position before entry k.
local function ring_start(key, ring, k)
  if k == 0 then
    return ring.base
  end
  local _, ends = ring_at(key, ring, k - 1)
  return ends
end

-- The first k whose time is after `after` (size when none is).
local function ring_first_after(key, ring, after)
  local low, high = 0, ring.size
  while low < high do
    local middle = math.floor((low + high) / 2)
    if ring_at(key, ring, middle) > after then
      high = middle
    else
      low = middle + 1
    end
  end
  return low
end

-- The first k at or after from whose end position reaches target (one exists).
local function ring_first_reaching(key, ring, from, target)
  local low, high = from, ring.size - 1
  while low < high do
    local middle = math.floor((low + high) / 2)
    local _, ends = ring_at(key, ring, middle)
    if ends >= target then
      high = middle
    else
      low = middle + 1
    end
  end
  return low
end

ALGORITHMS.compact_log = {
  check = function(key, limit, window_us, now_us, cost)
    local ring = ring_open(key)
    local count, first, start, last_us, last_end = 0, 0, 0, 0, 0
    if ring then
      start, last_end = ring.base, ring.base
      if ring.size > 0 then
        first = ring_first_after(key, ring, now_us - window_us)
        last_us, last_end = ring_at(key, ring, ring.size - 1)
        start = ring_start(key, ring, first)
      end
      count = last_end - start
    end
    if count + cost <= limit then
      local reset_us = window_us
      if count > 0 then
        reset_us = ring_at(key, ring, first) + window_us - now_us
      end
      local remaining = limit - count - cost
      return {
        allowed = true, count = count, remaining = remaining, retry_us = 0,
        reset_us = reset_us,
        -- With this request the log is full until its oldest entry leaves.
        full_us = remaining == 0 and reset_us or 0,
        ring = ring, first = first, start = start, last_us = last_us, last_end = last_end,
      }
    end
    -- The request fits once the (count + cost - limit)th oldest unit has left.
    local k = ring_first_reaching(key, ring, first, start + count + cost - limit)
    local retry_us = ring_at(key, ring, k) + window_us - now_us
    return {
      allowed = false, count = count, remaining = 0, retry_us = retry_us, reset_us = retry_us,
    }
  end,

  record = function(key, limit, window_us, now_us, state, cost)
    local at = math.max(now_us, state.last_us)
    local ttl_ms = ceil_div(at + window_us - now_us, 1000)
    local entry = struct.pack('>dd', at, state.last_end + cost)
    local ring = state.ring
    if not ring then
      redis.call('SET', key, ring_header(0, 1, 0) .. entry, 'PX', ttl_ms)
      return
    end
    -- The entries that left the window are dropped: the head moves past them.
    local blob = ring.blob
    ring = {
      head = (ring.head + state.first) % ring.capacity, size = ring.size - state.first,
      base = state.start, capacity = ring.capacity,
    }
    if ring.size < ring.capacity then
      local offset = ring_offset(ring, ring.size)
      local header = ring_header(ring.head, ring.size + 1, ring.base)
      if blob then -- read whole: written whole, in one command
        redis.call('SET', key,
          header .. string.sub(blob, RING_HEADER + 1, offset) .. entry
            .. string.sub(blob, offset + RING_SLOT + 1),
          'PX', ttl_ms)
        return
      end
      redis.call('SETRANGE', key, offset, entry)
      redis.call('SETRANGE', key, 0, header)
      redis.call('PEXPIRE', key, ttl_ms)
      return
    end
    -- Full of entries still in the window: a ring of twice the slots (at most the
    -- limit, at least one more), the entries oldest first from slot 0.
    local capacity = math.max(ring.size + 1, math.min(2 * ring.capacity, limit))
    blob = blob or redis.call('GET', key)
    local from = RING_HEADER + RING_SLOT * ring.head
    local kept = string.sub(blob, from + 1) .. string.sub(blob, RING_HEADER + 1, from)
    redis.call('SET', key,
      ring_header(0, ring.size + 1, ring.base) .. kept .. entry
        .. string.rep('\0', RING_SLOT * (capacity - ring.size - 1)),
      'PX', ttl_ms)
  end,

  -- The request's entry holds its time (or, after a clock step back, the newest time
  -- before it): the first entry at or after at_us, and among those with its time (up to
  -- 64), the first of its cost, is removed; the entries after it move back one slot,
  -- their positions lowered by its cost (O(m) for the m entries admitted after it,
  -- usually none). Were an older entry to hold a later time, it would go instead, and
  -- the newer one stay longer: that errs towards denying. The key keeps its expiry.
  give_back = function(key, limit, window_us, at_us, mark, cost)
    local ring = ring_open(key)
    if not ring or ring.size == 0 then
      return
    end
    local k = ring_first_after(key, ring, at_us - 1)
    if k >= ring.size then
      return
    end
    local at = ring_at(key, ring, k)
    local previous = ring_start(key, ring, k)
    local found
    for j = k, math.min(ring.size, k + 64) - 1 do
      local time, ends = ring_at(key, ring, j)
      if time ~= at then
        break
      end
      if ends - previous == cost then
        found = j
        break
      end
      previous = ends
    end
    if not found then
      return
    end
    if ring.size == 1 then
      redis.call('DEL', key)
      return
    end
    for j = found + 1, ring.size - 1 do
      local time, ends = ring_at(key, ring, j)
      redis.call('SETRANGE', key, ring_offset(ring, j - 1), struct.pack('>dd', time, ends - cost))
    end
    redis.call('SETRANGE', key, 0, ring_header(ring.head, ring.size - 1, ring.base))
  end,
}
