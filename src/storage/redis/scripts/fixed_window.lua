-- Fixed window, clock-aligned: mirrors src/algorithms/fixed_window.cpp (namespace fixed_window).
-- State: "start count" (a string); absent = {start = 0, count = 0}.
-- Per limit ARGV: amount, period.
local F = 2

local function read_limit(b)
  return {amount = tonumber(ARGV[b + 1]), period = tonumber(ARGV[b + 2])}
end

local function load(key, l)
  local start, count = read_window(key)
  return {start = start, count = count}
end

-- window_start(t, P) for t ≥ 0
local function window_start(t, period) return t - math.fmod(t, period) end

-- The window the key is in at `now`: the clock's, or the stored one if the clock stepped back
-- into an earlier window (no time is taken to have passed).
local function current_start(s, l, now)
  local start = window_start(now, l.period)
  if s.count > 0 and s.start > start then return s.start end
  return start
end

local function evaluate(s, l, now, cost, shape)
  local start = current_start(s, l, now)
  local finish = start + l.period
  local count = 0
  if s.count > 0 and s.start == start then count = s.count end
  local d = decision(l.amount, l.period)
  d.allowed = cost == 0 or cost <= l.amount - count  -- count > amount after a lowered limit
  local after = count
  if d.allowed then after = count + cost end
  d.remaining = l.amount - after
  if d.remaining < 0 then d.remaining = 0 end
  d.reset_after = 0
  if after > 0 then d.reset_after = finish - now end
  if d.allowed then
    d.retry_after = 0
  elseif cost > l.amount then
    d.retry_after = NEVER
  else
    d.retry_after = finish - now
  end
  return d
end

local function commit(s, l, now, cost)
  if cost == 0 then return end
  local start = current_start(s, l, now)
  if s.count == 0 or s.start ~= start then
    s.start = start
    s.count = 0
    s.moved = true  -- a new window: a new expiry (save)
  end
  s.count = s.count + cost
end

local function save(key, s, l, now)
  write_window(key, s.start, s.count, s.moved, l.period, now)
end

-- One limit (decide.lua's `main`): load, evaluate, commit and save above without their tables,
-- on the same key and state; tests/integration/redis/redis_paths_test.cpp holds the two paths
-- to the same decisions and state.
local function fast(key, now, cost, hit)
  local amount, period = tonumber(ARGV[6]), tonumber(ARGV[7])
  local start, count = read_window(key)
  local cur = window_start(now, period)
  if count > 0 and start > cur then cur = start end  -- current_start
  if start ~= cur then count = 0 end
  return window_answer(key, cur, count, amount, period, now, cost, hit)
end
