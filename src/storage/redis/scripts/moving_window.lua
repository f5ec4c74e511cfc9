-- Moving window, the exact log: mirrors src/algorithms/moving_window.cpp.
-- State: a list; element 0 is `total` (the sum of the log's counts), then the log oldest first,
-- one element "at count" per instant (units admitted at one instant are merged, so a cost of
-- 100,000 is one element). Read with LRANGE: the total and the first FIRST entries, then chunks of
-- CHUNK only as far as entries have left the window; nothing else is unpacked. A log of up to FIRST
-- entries costs one LRANGE to read, a longer one LLEN and LINDEX as well (its size and newest
-- entry), not a read of all of it; LSET, RPUSH (or LSET), PEXPIRE to write.
-- Per limit ARGV: amount, period.
local F = 2
local fast = nil  -- one limit goes through decide.lua's `single`
local FIRST = 16
local CHUNK = 128

local function read_limit(b)
  return {amount = tonumber(ARGV[b + 1]), period = tonumber(ARGV[b + 2])}
end

local function entry(key, v)
  local at, count = fields(v, 2, key)
  if count < 1 then foreign(key) end
  return at, count
end

-- `first`: the total and the first FIRST entries (in_window's first chunk).
local function load(key, l)
  local s = {key = key, total = 0, size = 0}
  local first = redis.call('LRANGE', key, 0, FIRST)  -- WRONGTYPE for a key that is not a list
  if #first == 0 then return s end
  s.total = fields(first[1], 1, key)
  s.first = first
  s.size = #first - 1
  local back = first[#first]
  if #first > FIRST then
    s.size = redis.call('LLEN', key) - 1
    back = redis.call('LINDEX', key, -1)
  end
  if s.size < 1 then foreign(key) end
  s.back_at, s.back_count = entry(key, back)
  return s
end

-- The log's entries oldest first, as a generic-for iterator of (at, count): those load read, then
-- the rest read on in chunks of CHUNK, only as far as the caller walks.
local function oldest_first(s)
  local chunk, j, next = s.first, 1, 0
  if chunk then next = #chunk end  -- list indexes 1…#first − 1 are in `first` (index 0: the total)
  return function()
    j = j + 1
    if chunk and j > #chunk then
      chunk = nil
      if next <= s.size then
        chunk = redis.call('LRANGE', s.key, next, next + CHUNK - 1)
        if #chunk == 0 then foreign(s.key) end  -- shorter than its LLEN: not ours
        next, j = next + #chunk, 1
      end
    end
    if not chunk then return nil end
    return entry(s.key, chunk[j])
  end
end

-- Units in the window at `now`: the total less the entries that have left it (oldest first).
-- Remembers how many entries have left (`gone`) for commit; `now` is one value per script.
local function in_window(s, l, now)
  if s.in_window then return s.in_window end
  local n, gone = s.total, 0
  for at, count in oldest_first(s) do
    if at >= now - l.period then break end
    n = n - count
    gone = gone + 1
  end
  s.in_window, s.gone = n, gone
  return n
end

-- The time of the k-th most recent admitted unit, 1 ≤ k ≤ `count` units in the window: walks from
-- whichever end of the window is nearer.
local function kth_most_recent(s, k, count)
  local seen = 0
  if k <= div(count, 2) then
    local off = 0
    while off < s.size do
      local first = -(off + CHUNK)
      if first < -s.size then first = -s.size end
      local chunk = redis.call('LRANGE', s.key, first, -(off + 1))
      for j = #chunk, 1, -1 do
        local at, c = entry(s.key, chunk[j])
        seen = seen + c
        if seen >= k then return at end
      end
      off = off + CHUNK
    end
  else
    -- The k-th most recent is the (count − k + 1)-th oldest of the window's units; the units
    -- before the window come first in the log.
    local target = s.total - count + (count - k + 1)
    for at, c in oldest_first(s) do
      seen = seen + c
      if seen >= target then return at end
    end
  end
  if s.size == 0 then return 0 end
  return s.back_at
end

local function evaluate(s, l, now, cost, shape)
  local count = in_window(s, l, now)
  local d = decision(l.amount, l.period)
  d.allowed = cost == 0 or cost <= l.amount - count  -- cost 0: even after a clock step back
  local after = count
  if d.allowed then after = count + cost end
  d.remaining = l.amount - after
  if d.remaining < 0 then d.remaining = 0 end
  -- The newest unit stops counting one microsecond after it is P old.
  if d.allowed and cost > 0 then
    local newest = now
    if s.size > 0 and s.back_at > now then newest = s.back_at end
    d.reset_after = newest + l.period + 1 - now
  elseif count > 0 then
    d.reset_after = s.back_at + l.period + 1 - now
  else
    d.reset_after = 0
  end
  if d.allowed then
    d.retry_after = 0
  elseif cost > l.amount then
    d.retry_after = NEVER
  else
    -- Room for `cost` units once the (N − c + 1)-th most recent unit has left the window.
    local e = kth_most_recent(s, l.amount - cost + 1, count)
    d.retry_after = e + l.period + 1 - now
  end
  return d
end

-- Appends the request and drops entries older than the period (in_window counted them).
local function commit(s, l, now, cost)
  if cost == 0 then return end
  local count = in_window(s, l, now)
  s.total = count + cost
  s.left = s.size - s.gone  -- entries that stay
  if s.left > 0 and s.back_at >= now then
    s.back_count = s.back_count + cost  -- same instant (or a clock that stepped back): merge
    s.merged = true
  else
    s.back_at, s.back_count = now, cost
    s.merged = false
  end
end

local function expires_at(s, l)
  if s.total == 0 then return 0 end
  return s.back_at + l.period + 1
end

-- A merged entry keeps its time, so the list keeps its expiry.
local function save(key, s, l, now)
  local last = pair(s.back_at, s.back_count)
  if s.size == 0 then
    redis.call('RPUSH', key, int(s.total), last)
  else
    -- Drops the entries that have left; the element before the first that stays (the old total,
    -- or the last entry to leave) takes the new total.
    if s.gone > 0 then redis.call('LTRIM', key, s.gone, -1) end
    redis.call('LSET', key, 0, int(s.total))
    if s.merged then
      redis.call('LSET', key, -1, last)
    else
      redis.call('RPUSH', key, last)
    end
  end
  if not s.merged then redis.call('PEXPIRE', key, ttl_ms(expires_at(s, l), now)) end
end

-- The time of the newest entry, read right after a commit: the entry that holds what it committed.
local function mark(s, l) return s.back_at or 0 end

-- A reservation's settle (moving_window::settle): the log's entry at `at` while `at` is in the
-- window, found from the newest end in chunks and changed in place (LSET; an entry that falls to
-- 0 is removed with LREM, the log deleted when it is left empty); else a positive delta is
-- appended at `now` like a commit, a negative one dropped.
local function settle(s, l, now, at, mark, delta)
  -- The log's total saturates at MAX_COUNT: a charge adds at most what fits (moving_window::settle).
  if delta > 0 and delta > MAX_COUNT - s.total then
    delta = MAX_COUNT - s.total
    if delta < 0 then delta = 0 end
  end
  if delta == 0 then return end
  if mark and mark > 0 then at = mark end  -- the entry the reservation's commit went to
  if at >= now - l.period and s.size > 0 then
    local off = 0
    while off < s.size do
      local first = -(off + CHUNK)
      if first < -s.size then first = -s.size end
      local chunk = redis.call('LRANGE', s.key, first, -(off + 1))
      for j = #chunk, 1, -1 do
        local t, c = entry(s.key, chunk[j])
        if t == at then
          local after = c + delta
          if after < 0 then after = 0 end
          s.total = s.total + after - c
          if s.total == 0 then
            redis.call('DEL', s.key)
          elseif after > 0 then
            redis.call('LSET', s.key, first + j - 1, pair(t, after))
            redis.call('LSET', s.key, 0, int(s.total))
          else
            redis.call('LSET', s.key, first + j - 1, '-')
            redis.call('LREM', s.key, 1, '-')
            redis.call('LSET', s.key, 0, int(s.total))
          end
          return
        end
        if t < at then off = s.size break end
      end
      off = off + CHUNK
    end
  end
  if delta > 0 then
    commit(s, l, now, delta)
    s.changed = true
  end
end
local function settled(key, s, l, now) if s.changed then save(key, s, l, now) end end
