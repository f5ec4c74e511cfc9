-- Fixed window, clock-aligned: mirrors src/algorithms/fixed_window.cpp (namespace fixed_window).
-- State: "start count" (a string), or packed into one integer (common.lua, `packs`); absent =
-- {start = 0, count = 0}.
-- Per limit ARGV: amount, period.
local F = 2

local function read_limit(b)
  return {amount = tonumber(ARGV[b + 1]), period = tonumber(ARGV[b + 2])}
end

local function load(key, l, now)
  local start, count = read_window(key, l.period, now)
  return {start = start, count = count}
end

-- The window the key is in at `now`: the clock's, or the stored one if the clock stepped back
-- into an earlier window (no time is taken to have passed).
local function current_start(start, count, period, now)
  local cur = window_start(now, period)
  if count > 0 and start > cur then return start end
  return cur
end

local function evaluate(s, l, now, cost, shape)
  local start = current_start(s.start, s.count, l.period, now)
  return window_decision(l, now, cost, window_count(s, start), start + l.period)
end

local function commit(s, l, now, cost)
  if cost == 0 then return end
  window_commit(s, current_start(s.start, s.count, l.period, now), cost)
end

local function save(key, s, l, now)
  -- A settle may leave a count past the amount: packed only while a hit cannot carry into the slot.
  write_window(key, s.start, s.count, s.moved, l.period, now, packs(l.amount, l.period) and s.count < COUNT / 2)
end

-- A reservation's settle (fixed_window::settle): the window that held `at` still holds the count.
local function settle(s, l, now, at, mark, delta)
  local start = current_start(s.start, s.count, l.period, now)
  window_settle(s, start, start + l.period, at, delta)
end
local function mark(s, l) return 0 end
local function settled(key, s, l, now) if s.changed then save(key, s, l, now) end end

-- A hit of `cost` (1 ≤ cost ≤ amount) that INCRBY has added to a packed state, giving `n`: the
-- decision `fast` would take on the state before it, and the state it would write. A refused hit
-- is taken back; a state of an earlier window (or none: INCRBY made the key) is replaced by the
-- clock's window holding this hit.
local function raised(key, n, cur, amount, period, now, cost)
  local after = math.fmod(n, COUNT)
  local slot = (n - after) / COUNT
  if n ~= cost and (slot < 1 or slot > SLOTS or after < cost) then  -- not a packed state + cost
    redis.call('INCRBY', key, -cost)
    foreign(key)
  end
  local start = cur - period  -- slot 0: INCRBY made the key
  if slot > 0 then start = slot_start(slot, cur, period) end
  if start < cur then return window_answer(key, cur, 0, amount, period, now, cost, true, true) end
  -- The clock's window, or a later one after a step back: the hit is in it unless refused.
  if after > amount then redis.call('INCRBY', key, -cost) end
  return window_answer(key, start, after - cost, amount, period, now, cost, true, true, true)
end

-- One limit (decide.lua's `main`): load, evaluate, commit and save above without their tables,
-- on the same key and state; tests/integration/redis/redis_paths_test.cpp holds the two paths
-- to the same decisions and state. A hit on a packed state is one INCRBY (`raised`); a key still
-- holding the text form (written by an earlier version or on a client's clock) refuses INCRBY
-- and takes the text path, which writes it packed.
local function fast(key, now, cost, hit)
  local amount, period = tonumber(ARGV[6]), tonumber(ARGV[7])
  local pack = packs(amount, period)
  if pack and hit and cost > 0 and cost <= amount then
    local n = redis.pcall('INCRBY', key, ARGV[2])
    if type(n) == 'number' then
      local cur = window_start(now, period)
      local after = math.fmod(n, COUNT)
      -- The common hit, `raised` in short: the key holds the clock's window, with room for this hit.
      if n - after == slot_of(cur, period) * COUNT and cost <= after and after <= amount then
        return allowed_answer(amount - after, cur + period - now)
      end
      -- A key INCRBY made (or one that held 0): the clock's window opens with this hit.
      if n == cost then
        redis.call('SET', key, packed(cur, cost, period), 'PX', ttl_ms(cur + period, now))
        return allowed_answer(amount - cost, cur + period - now)
      end
      return raised(key, n, cur, amount, period, now, cost)
    end
    if not string.find(n.err, 'not an integer', 1, true) then return n end
  end
  local start, count = read_window(key, period, now)
  local cur = current_start(start, count, period, now)
  if start ~= cur then count = 0 end
  return window_answer(key, cur, count, amount, period, now, cost, hit, pack)
end
