-- Sliding window counter with epoch-aligned buckets: mirrors src/algorithms/sliding_window.cpp.
-- State: "start current previous" (a string); absent = all 0.
-- Per limit ARGV: amount, period.
local F = 2
local fast = nil  -- one limit goes through decide.lua's `single`

local function read_limit(b)
  return {amount = tonumber(ARGV[b + 1]), period = tonumber(ARGV[b + 2])}
end

local function load(key, l)
  local v = redis.call('GET', key)
  if not v then return {start = 0, current = 0, previous = 0} end
  local start, current, previous = fields(v, 3, key)
  return {start = start, current = current, previous = previous}
end

local function counts_at(s, l, now)
  local start = window_start(now, l.period)
  if s.current == 0 and s.previous == 0 then return start, 0, 0 end
  if s.start == start then return start, s.current, s.previous end
  if s.start == start - l.period then return start, 0, s.current end
  if s.start > start then return s.start, s.current, s.previous end  -- clock stepped back
  return start, 0, 0
end

-- ⌊previous·(P − elapsed)/P⌋
local function weighted_previous(previous, elapsed, period)
  if elapsed == 0 then return previous end  -- muldiv's quotient must stay below 2^53: previous may be 2^53
  local q = muldiv(previous, period - elapsed, 0, period)
  return q
end

-- The smallest elapsed e in [0, P] with ⌊prev·(P−e)/P⌋ ≤ room (room ≥ 0, prev ≥ 0).
local function first_elapsed_with_room(prev, room, period)
  if prev == 0 then return 0 end
  -- ⌊prev·(P−e)/P⌋ ≤ room  ⇔  P − e ≤ ⌊((room+1)·P − 1)/prev⌋; when room + 1 > prev that bound
  -- is at least P (the C++ computes it in 128 bits and clamps e at 0).
  if room + 1 > prev then return 0 end
  local max_left = muldiv(room, period, period - 1, prev)
  if period - max_left < 0 then return 0 end
  return period - max_left
end

local function evaluate(s, l, now, cost, shape)
  local start, current, previous = counts_at(s, l, now)
  local elapsed = now - start
  if elapsed < 0 then elapsed = 0 end
  local weighted = current + weighted_previous(previous, elapsed, l.period)
  local d = decision(l.amount, l.period)
  d.allowed = cost == 0 or cost <= l.amount - weighted  -- cost 0: even after a clock step back
  local current_after, weighted_after = current, weighted
  if d.allowed then
    current_after = current + cost
    weighted_after = weighted + cost
  end
  d.remaining = l.amount - weighted_after
  if d.remaining < 0 then d.remaining = 0 end
  if current_after > 0 then
    d.reset_after = start + 2 * l.period - now
  elseif previous > 0 then
    d.reset_after = start + l.period - now
  else
    d.reset_after = 0
  end
  if d.allowed then
    d.retry_after = 0
  elseif cost > l.amount then
    d.retry_after = NEVER
  elseif cost <= l.amount - current then  -- not current + cost: past 2^53 a double rounds it
    -- Room appears later in this bucket, as the previous bucket's weight falls.
    local e = first_elapsed_with_room(previous, l.amount - cost - current, l.period)
    d.retry_after = start + e - now
  else
    -- Only in the next bucket, where this bucket's count becomes the previous one.
    local e = first_elapsed_with_room(current, l.amount - cost, l.period)
    d.retry_after = start + l.period + e - now
  end
  return d
end

local function commit(s, l, now, cost)
  if cost == 0 then return end
  local start, current, previous = counts_at(s, l, now)
  s.moved = start ~= s.start or s.current == 0  -- else the same expiry (save)
  s.start, s.current, s.previous = start, sat_add(current, cost), previous
end

local function expires_at(s, l)
  if s.current > 0 then return s.start + 2 * l.period end
  if s.previous > 0 then return s.start + l.period end
  return 0
end

-- The same bucket with a count keeps its expiry (as fixed_window.lua's save).
local function save(key, s, l, now)
  local v = string.format('%d %d %d', s.start, s.current, s.previous)
  if not s.moved then return redis.call('SET', key, v, 'KEEPTTL') end
  redis.call('SET', key, v, 'PX', ttl_ms(expires_at(s, l), now))
end

-- A reservation's settle (sliding_window::settle): the bucket that counted `at`, current or previous.
local function settle(s, l, now, at, mark, delta)
  if delta == 0 then return end
  local start, current, previous = counts_at(s, l, now)
  local b = window_start(at, l.period)
  if b == start then
    current = sat_add(current, delta)  -- never below 0, never past MAX_COUNT
  elseif b == start - l.period then
    previous = sat_add(previous, delta)
  elseif delta > 0 then
    current = sat_add(current, delta)
  else
    return
  end
  s.start, s.current, s.previous = start, current, previous
  s.moved = true
  s.changed = true
end
local function mark(s, l) return 0 end
local function settled(key, s, l, now) if s.changed then save(key, s, l, now) end end
