-- Fixed window anchored at the first admitted request: mirrors src/algorithms/fixed_window.cpp
-- (namespace fixed_window_first_hit).
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

local function open_at(start, count, period, now)
  return count > 0 and now < start + period
end

local function evaluate(s, l, now, cost, shape)
  local open = open_at(s.start, s.count, l.period, now)
  local count = 0
  if open then count = s.count end
  -- The window the key is in after this decision, if any.
  local finish = now + l.period
  if open then finish = s.start + l.period end
  return window_decision(l, now, cost, count, finish)
end

local function commit(s, l, now, cost)
  if cost == 0 then return end
  local start = now  -- a closed window: a new one opens at this hit
  if open_at(s.start, s.count, l.period, now) then start = s.start end
  window_commit(s, start, cost)
end

local function save(key, s, l, now)
  write_window(key, s.start, s.count, s.moved, l.period, now)
end

-- A reservation's settle (fixed_window_first_hit::settle): the open window opened by `at`.
local function settle(s, l, now, at, mark, delta)
  if delta == 0 then return end
  if open_at(s.start, s.count, l.period, now) and s.start <= at then
    s.count = sat_add(s.count, delta)
  elseif delta > 0 then
    commit(s, l, now, delta)
  end
  s.changed = true
end
local function mark(s, l) return 0 end
local function settled(key, s, l, now) if s.changed then save(key, s, l, now) end end

-- One limit (decide.lua's `main`): load, evaluate, commit and save above without their tables,
-- on the same key and state (tests/integration/redis/redis_paths_test.cpp).
local function fast(key, now, cost, hit)
  local amount, period = tonumber(ARGV[6]), tonumber(ARGV[7])
  local start, count = read_window(key)
  if not open_at(start, count, period, now) then start, count = now, 0 end
  return window_answer(key, start, count, amount, period, now, cost, hit)
end
