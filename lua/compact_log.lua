-- compact_log: the exact sliding window log, in a ring of fixed-width slots in one string.
--
-- KEYS  the policy's key (one KEYS[i] of decide.lua), "...:ring": a string of
--         25 bytes     header, big-endian: width (uint8, the bytes of a slot: 8 or 16),
--                      head (uint32, the slot of the oldest entry), size (uint32,
--                      entries held), base (double, the position before the oldest
--                      entry), anchor (double, the newest admission's time)
--         width x C    the ring of C slots, one per admitted request: its time in
--                      microseconds and its end position, either narrow (8 bytes: the
--                      time modulo 2^48, uint48, and the end modulo 2^16, uint16, read
--                      back as the time at or before anchor and the end after base) or
--                      wide (16 bytes: both as doubles, exact below 2^53)
--       Positions count units in time order: an entry of cost n ends n after the one
--       before it (the oldest: after base), so the units between two entries are a
--       difference of positions. A narrow slot holds any cost: a ring is narrow while
--       the units it holds (its newest end less base) stay under 2^16, and its entries
--       lie within 2^48 µs (8.9 years; a window is at most 30 days) of anchor. A ring
--       that would hold more is rewritten wide, and is narrow again at its next rewrite
--       holding under 2^15. A client costs 8 bytes per admitted request in the window,
--       whatever its cost (16 while it holds 65,536 units or more).
-- ARGV  the policy's slots in decide.lua's ARGV: limit, window in milliseconds, cost;
--       plus now_us from ARGV[1] (or Redis TIME).
--
-- It decides exactly as sliding_log does: a request is admitted when the units admitted
-- in (now - window, now] plus its cost fit the limit. Entries are in time order (a clock
-- that steps back is stored as the newest time seen), so the first entry in the window,
-- and the entry where enough units have left for a denied request, are found by binary
-- search. A ring of up to RING_WHOLE bytes (4 KB: 508 narrow slots) is read with one
-- GETRANGE and written with one SET, holding exactly its entries: fewer commands cost
-- less than the bytes copied. Past that, a request reads O(log C) slots (GETRANGE of
-- one slot) and writes one slot and the header (SETRANGE), never the whole string; C
-- is then a quarter over the entries when the ring is rewritten (at most the limit: the
-- entries in a window never outnumber it at an admission), which happens when it is
-- full, under half full, or changes width, each O(C) once. Only admitted requests are
-- stored, and the key expires a window after the newest admission.

local RING_HEADER = 25
local NARROW, WIDE = 8, 16
local TIME_SPAN = 2 ^ 48
local UNIT_SPAN = 2 ^ 16
-- A ring up to this many bytes is read and written whole.
local RING_WHOLE = 4096

local function ring_bad(key)
  error('ratelimits: ' .. key .. ' does not hold a compact_log ring')
end

-- The ring's header as a table (width, head, size, base, anchor, capacity), or nil for
-- no key. A ring of at most RING_WHOLE bytes is read whole (blob): its slots are then
-- read in memory, and a request writes it back whole, in one SET, instead of a command
-- per slot.
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
  if #header < RING_HEADER then
    ring_bad(key)
  end
  local width, head, size, base, anchor = struct.unpack('>BI4I4dd', header)
  if width ~= NARROW and width ~= WIDE then
    ring_bad(key)
  end
  local capacity = (length - RING_HEADER) / width
  if capacity < 1 or capacity ~= math.floor(capacity) or head >= capacity or size > capacity then
    ring_bad(key)
  end
  return {
    width = width, head = head, size = size, base = base, anchor = anchor,
    capacity = capacity, blob = blob,
  }
end

local function ring_header(width, head, size, base, anchor)
  return struct.pack('>BI4I4dd', width, head, size, base, anchor)
end

-- One entry's slot of this width.
local function ring_slot(width, time, ends)
  if width == NARROW then
    return struct.pack('>I6I2', time % TIME_SPAN, ends % UNIT_SPAN)
  end
  return struct.pack('>dd', time, ends)
end

-- The time and end position of the slot at byte `from` (1-based) of bytes.
local function ring_read(ring, bytes, from)
  if ring.width == NARROW then
    local time, ends = struct.unpack('>I6I2', bytes, from)
    return ring.anchor - (ring.anchor - time) % TIME_SPAN, ring.base + (ends - ring.base) % UNIT_SPAN
  end
  local time, ends = struct.unpack('>dd', bytes, from)
  return time, ends
end

-- The byte offset of entry k (0: the oldest).
local function ring_offset(ring, k)
  return RING_HEADER + ring.width * ((ring.head + k) % ring.capacity)
end

-- The time and end position of entry k (from the ring in memory when it was read whole).
local function ring_at(key, ring, k)
  local offset = ring_offset(ring, k)
  if ring.blob then
    return ring_read(ring, ring.blob, offset + 1)
  end
  return ring_read(ring, redis.call('GETRANGE', key, offset, offset + ring.width - 1), 1)
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

-- The slots of entries from .. from + count - 1, oldest first, as slots of width (the
-- ring's own bytes, or each entry read and written again for the other width).
local function ring_slots(key, ring, from, count, width)
  local function slots(a, b) -- ring slots a .. b - 1, with b <= capacity
    local low, high = RING_HEADER + ring.width * a, RING_HEADER + ring.width * b
    if ring.blob then
      return string.sub(ring.blob, low + 1, high)
    end
    return redis.call('GETRANGE', key, low, high - 1)
  end
  if count == 0 then
    return ''
  end
  local first = (ring.head + from) % ring.capacity
  local bytes
  if first + count <= ring.capacity then
    bytes = slots(first, first + count)
  else
    bytes = slots(first, ring.capacity) .. slots(0, first + count - ring.capacity)
  end
  if width == ring.width then
    return bytes
  end
  local parts = {}
  for k = 0, count - 1 do
    parts[k + 1] = ring_slot(width, ring_read(ring, bytes, ring.width * k + 1))
  end
  return table.concat(parts)
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
    local ends = state.last_end + cost
    local ring = state.ring
    if not ring then
      local width = cost < UNIT_SPAN and NARROW or WIDE
      redis.call('SET', key, ring_header(width, 0, 1, 0, at) .. ring_slot(width, at, ends),
        'PX', ttl_ms)
      return
    end
    -- The entries that left the window are dropped: the head moves past them, and base
    -- to the end of the last of them.
    local kept, base = ring.size - state.first, state.start
    local held, size = ends - base, ring.size - state.first + 1
    if not ring.blob and size <= ring.capacity and 2 * size > ring.capacity
      and (ring.width == WIDE or held < UNIT_SPAN) then -- in place: one slot, the header
      local head = (ring.head + state.first) % ring.capacity
      local offset = RING_HEADER + ring.width * ((head + kept) % ring.capacity)
      redis.call('SETRANGE', key, offset, ring_slot(ring.width, at, ends))
      redis.call('SETRANGE', key, 0, ring_header(ring.width, head, size, base, at))
      redis.call('PEXPIRE', key, ttl_ms)
      return
    end
    -- Rewritten whole, oldest first from slot 0: narrow unless it holds 2^16 units or
    -- more (or is wide and still holds 2^15 or more), its slots exactly its entries
    -- when it is read whole, else a quarter more (at most the limit).
    local width = NARROW
    if held >= UNIT_SPAN or (ring.width == WIDE and held >= UNIT_SPAN / 2) then
      width = WIDE
    end
    local capacity = size
    if RING_HEADER + width * size > RING_WHOLE then
      capacity = math.max(size, math.min(size + math.floor(size / 4), limit))
    end
    redis.call('SET', key,
      ring_header(width, 0, size, base, at) .. ring_slots(key, ring, state.first, kept, width)
        .. ring_slot(width, at, ends) .. string.rep('\0', width * (capacity - size)),
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
      redis.call('SETRANGE', key, ring_offset(ring, j - 1), ring_slot(ring.width, time, ends - cost))
    end
    redis.call('SETRANGE', key, 0,
      ring_header(ring.width, ring.head, ring.size - 1, ring.base, ring.anchor))
  end,
}
