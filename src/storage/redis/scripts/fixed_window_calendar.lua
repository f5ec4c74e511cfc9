-- Fixed window, clock-aligned, for a policy with a calendar limit: mirrors
-- src/algorithms/fixed_window.cpp (namespace fixed_window) with Limit::window_at. Lua cannot read
-- time zones, so the C++ side (protocol.cpp, limit_args) sends each calendar limit's period
-- boundaries around the client's clock: the starts of the previous, the current, the next and
-- the following period. The window holding `now` (the server's TIME by default) is picked among
-- those three periods, so clocks that disagree by less than a period decide alike; beyond that
-- the call fails with an error (docs/algorithms.md, "Calendar periods"). A policy's limits
-- without a calendar get '' boundaries and epoch-aligned windows, as in fixed_window.lua.
-- State: "start count" (a string, never the packed form); absent = {start = 0, count = 0}.
-- Per limit ARGV: amount, period (the nominal one for a calendar limit), then four period starts
-- in µs, or four ''.
local F = 6

local function read_limit(b)
  local l = {amount = tonumber(ARGV[b + 1]), period = tonumber(ARGV[b + 2])}
  if ARGV[b + 3] ~= '' then
    l.starts = {tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6])}
  end
  return l
end

-- The window [start, finish) holding t (Limit::window_at): epoch-aligned, or the calendar period
-- among those sent.
local function window_at(l, t)
  if not l.starts then
    local start = window_start(t, l.period)
    return start, start + l.period
  end
  local s = l.starts
  for i = 1, 3 do
    if s[i] <= t and t < s[i + 1] then return s[i], s[i + 1] end
  end
  fail('time ' .. int(t) .. ' is outside the calendar periods sent, from ' .. int(s[1]) .. ' to ' .. int(s[4])
       .. ': the server clock and the client clock disagree by more than a period')
end

local function load(key, l, now)
  local start, count = read_window(key, nil, now)
  return {start = start, count = count}
end

-- The window the key is in at `now`: the clock's (a calendar period for a calendar limit), or the
-- stored one if the clock stepped back into an earlier window (no time is taken to have passed).
local function current_window(s, l, now)
  local start, finish = window_at(l, now)
  if s.count > 0 and s.start > start then return window_at(l, s.start) end
  return start, finish
end

local function evaluate(s, l, now, cost, shape)
  local start, finish = current_window(s, l, now)
  return window_decision(l, now, cost, window_count(s, start), finish)
end

local function commit(s, l, now, cost)
  if cost == 0 then return end
  window_commit(s, (current_window(s, l, now)), cost)
end

-- A new window expires at its end (expires_at: the real period end); the same window keeps the
-- expiry it has.
local function save(key, s, l, now)
  local v = pair(s.start, s.count)
  if not s.moved then return redis.call('SET', key, v, 'KEEPTTL') end
  local _, finish = window_at(l, s.start)
  redis.call('SET', key, v, 'PX', ttl_ms(finish, now))
end

local fast = nil  -- one limit goes through decide.lua's `single`

-- A reservation's settle (fixed_window::settle): the window that held `at` still holds the count.
local function settle(s, l, now, at, mark, delta)
  local start, finish = current_window(s, l, now)
  window_settle(s, start, finish, at, delta)
end
local function mark(s, l) return 0 end
local function settled(key, s, l, now) if s.changed then save(key, s, l, now) end end
