-- floodgate: the part every script shares (the build prepends it to the algorithm's file and
-- appends decide.lua). The algorithm files mirror src/algorithms/*.cpp line for line; decide.lua
-- mirrors MemoryStorage's `decide` (src/storage/memory/memory_storage.cpp).
--
-- KEYS[i]  the state of limit i (all keys hash-tag the user's key: one cluster slot).
-- ARGV[1]  now in µs since the epoch, or '' for the server's TIME (the default clock).
-- ARGV[2]  cost (0 ≤ cost ≤ 2^53);  ARGV[3] '1' hit / '0' test;  ARGV[4] '1' shape / '0'.
-- ARGV[5]  ms added to every TTL: 0 with the server clock (TTLs are then exact); with a client
--          clock, a margin for a caller whose clock runs slower than Redis's (replay).
-- ARGV[6…] F arguments per limit (the algorithm's read_limit says which).
-- Reply: `answer` (a string of 7 integers).
--
-- Numbers: Lua numbers are doubles, exact for integers up to 2^53. Every value here is an integer
-- kept below 2^53; a product that may not be is formed with muldiv (exact, 53 × 53 bits); the
-- C++ side refuses limits whose values cannot stay below it. State is stored as decimal integers
-- written with '%d' (tostring would round to 14 digits).
local TWO53 = 9007199254740992
local NEVER = -1

local function fail(msg) error('floodgate: ' .. msg, 0) end
local function foreign(key) fail('key ' .. key .. ' holds a value floodgate did not write') end

-- Runs a script's body (`main`, `group`): its reply, or an error reply with the message alone.
local function run(body)
  local ok, result = pcall(body)
  if ok then return result end
  if type(result) == 'table' then return result end  -- an error reply of redis.call (WRONGTYPE, OOM…)
  return redis.error_reply(tostring(result))
end

-- '%d' formats through a C long (64 bits here): exact for every integer the scripts store, and
-- without the floating-point formatting of '%.0f'.
local function int(x) return string.format('%d', x) end
local function pair(a, b) return string.format('%d %d', a, b) end

-- The integers of a stored value, exactly `n` (1 to 3) of them separated by single spaces, as `n`
-- values, or an error (the key holds something else). One pattern match and no table: the
-- server's cost of reading state.
local FIELDS = {'^(%-?%d+)$', '^(%-?%d+) (%-?%d+)$', '^(%-?%d+) (%-?%d+) (%-?%d+)$'}
local function fields(v, n, key)
  local a, b, c = string.match(v, FIELDS[n])
  if not a then foreign(key) end
  return tonumber(a), tonumber(b), tonumber(c)
end

-- A decision with every field present (a table that is never rehashed as its fields are set).
local function decision(limit, period)
  return {allowed = false, limit = limit, period = period, remaining = 0, reset_after = 0,
          retry_after = 0, delay = 0}
end

-- The decision reply of every script (combine.lua's `reply`, the algorithms' one-limit `fast`;
-- parse_decision in src/storage/redis/replies.cpp): one string of 7 integers separated by single
-- spaces, "allowed(1/0) limit period remaining reset_after retry_after(-1 = never) delay", and an
-- 8th, the named limit's reset_after, when several limits were combined. A string
-- and not a table of 7 integers: the server turns a table into a reply element by element, after
-- probing it for the fields of an error or a status reply, which cost it 0.25–0.4 µs more per
-- call than formatting the string (docs/benchmarks.md), and the client reads one string where
-- hiredis made 8 reply objects.
local function answer(allowed, limit, period, remaining, reset_after, retry_after, delay, limit_reset_after)
  if limit_reset_after then
    return string.format('%d %d %d %d %d %d %d %d', allowed and 1 or 0, limit, period, remaining, reset_after,
                         retry_after, delay, limit_reset_after)
  end
  return string.format('%d %d %d %d %d %d %d', allowed and 1 or 0, limit, period, remaining, reset_after,
                       retry_after, delay)
end

-- The short reply of an allowed decision of a call's one limit (KEYS[1]) that reports the amount
-- and period the call gave it (ARGV[6], ARGV[7]) and no wait (retry_after and delay 0): the string
-- "remaining reset_after". The client fills in the rest from what it sent (parse_decision); two
-- integers to format instead of seven (each '%d' is a sprintf), and a shorter reply to read. The
-- common hit's reply; never from the group script or after several limits.
local function allowed_answer(remaining, reset_after)
  return string.format('%d %d', remaining, reset_after)
end

local function now_micros()
  if ARGV[1] ~= '' then return tonumber(ARGV[1]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- ⌊a / b⌋ for a ≥ 0, b > 0 (math.fmod is exact; '%' is not).
local function div(a, b) return (a - math.fmod(a, b)) / b end

-- The ceiling of every count of units (kMaxCount in src/algorithms/arith.hpp): 2^53. sat_add is
-- arith.hpp's: count + delta clamped to [0, MAX_COUNT], for 0 ≤ count ≤ 2^53 and |delta| ≤ 2^53,
-- never forming a sum past 2^53 (a double would round it), so it equals the C++ exactly.
local MAX_COUNT = TWO53
local function sat_add(count, delta)
  if delta >= MAX_COUNT - count then return MAX_COUNT end
  local sum = count + delta
  if sum < 0 then return 0 end
  return sum
end

-- (a + b) mod m and the carry, for 0 ≤ a, b < m ≤ 2^53, without forming a + b.
local function addmod(a, b, m)
  if a >= m - b then return a - (m - b), 1 end
  return a + b, 0
end

-- q, r with a·b + c = q·d + r and 0 ≤ r < d, for integers 0 ≤ a, b, c < 2^53 and 0 < d ≤ 2^53:
-- exact (the C++ uses 128-bit integers). An error if q ≥ 2^53.
local function muldiv(a, b, c, d)
  local p = a * b
  if p < TWO53 and p <= TWO53 - c then
    local s = p + c
    local r = math.fmod(s, d)
    return (s - r) / d, r
  end
  local ra = math.fmod(a, d)
  local qa = (a - ra) / d
  if qa * b >= TWO53 then fail('arithmetic overflow') end
  local r = math.fmod(c, d)
  local q = (c - r) / d + qa * b
  local pq, pr = 0, ra  -- ra·2^i = pq·d + pr
  local bb = b
  while bb > 0 do
    local bit = math.fmod(bb, 2)
    bb = (bb - bit) / 2
    local carry
    if bit == 1 then
      r, carry = addmod(r, pr, d)
      q = q + pq + carry
    end
    if bb > 0 then
      pr, carry = addmod(pr, pr, d)
      pq = pq + pq + carry
    end
  end
  if q >= TWO53 then fail('arithmetic overflow') end
  return q, r
end

-- A TTL in ms for a state that equals "absent" from `expires_at` on (never less than 1 ms).
local function ttl_ms(expires_at, now)
  local ms = div(expires_at - now + 999, 1000)
  if ms < 1 then ms = 1 end
  return ms + tonumber(ARGV[5])
end

-- window_start(t, P) for t ≥ 0: the start of the clock-aligned window that holds t.
local function window_start(t, period) return t - math.fmod(t, period) end

-- The two fixed windows (fixed_window.lua, fixed_window_first_hit.lua) share their state, "start
-- count" (absent = 0, 0), and what follows once the window at `now` is known.
--
-- The clock-aligned window may keep the same state packed into one integer, slot·2^32 + count,
-- with slot = (start / period mod (2^21 − 1)) + 1 (below 2^53: exact in Lua): INCRBY then raises
-- it in place (fixed_window.lua's `fast`), one command where the text needs GET, a parse, a
-- format and SET. It is written only where it is exact (`packs`): on the server's clock, whose
-- windows a key cannot outlive (its expiry is on the same clock), so a slot names one window, the
-- clock's or, after the server's clock stepped back by less than 2^20 windows (12 days of 1 s
-- windows), a later one; for periods of 1 s or more; and for amounts below 2^31, so that a count
-- and a cost never carry into the slot. Both forms are read wherever the aligned window is.
local COUNT = 4294967296  -- 2^32
local SLOTS = 2097151     -- 2^21 − 1
local function packs(amount, period)
  return ARGV[1] == '' and amount < COUNT / 2 and period >= 1000000
end
local function slot_of(start, period) return math.fmod(start / period, SLOTS) + 1 end
local function packed(start, count, period) return int(slot_of(start, period) * COUNT + count) end
-- The start of the window a packed state's slot names, beside the clock's window `cur`: `cur`
-- itself, a later one (the clock stepped back), or one before it (a state that is over).
local function slot_start(slot, cur, period)
  local d = math.fmod(slot - slot_of(cur, period) + SLOTS, SLOTS)
  if d < SLOTS / 2 then return cur + d * period end
  return cur - (SLOTS - d) * period
end

-- `period` and `now`: the aligned window's, which may find its state packed.
local function read_window(key, period, now)
  local v = redis.call('GET', key)
  if not v then return 0, 0 end
  if period and string.match(v, '^%d+$') then
    local n = tonumber(v)
    local count = math.fmod(n, COUNT)
    local slot = (n - count) / COUNT
    if slot < 1 or slot > SLOTS then foreign(key) end
    return slot_start(slot, window_start(now, period), period), count
  end
  return fields(v, 2, key)
end

-- The state written (both paths): a new window (`moved`) with its expiry; the same window keeps
-- the one it has (the key's name holds the period), and SET's KEEPTTL is half the server's cost
-- of its PX. `pack`: in the packed form.
local function write_window(key, start, count, moved, period, now, pack)
  local v
  if pack then v = packed(start, count, period) else v = pair(start, count) end
  if not moved then return redis.call('SET', key, v, 'KEEPTTL') end
  redis.call('SET', key, v, 'PX', ttl_ms(start + period, now))
end

-- A fixed window's one-limit decision (its `fast`: `amount` and `period` are ARGV[6] and ARGV[7],
-- so an allowed one is `allowed_answer`), the window [start, start + period) holding
-- `count` at `now` (0: a window that opens with this request). The same as its evaluate, commit
-- and save without their tables (tests/integration/redis/redis_paths_test.cpp). `counted`: an
-- allowed hit is already in the stored state (INCRBY, fixed_window.lua's `raised`).
local function window_answer(key, start, count, amount, period, now, cost, hit, pack, counted)
  local finish = start + period
  local allowed = cost == 0 or cost <= amount - count  -- count > amount after a lowered limit
  local wait = 0
  if not allowed then
    wait = finish - now
    if cost > amount then wait = NEVER end
  elseif hit and cost > 0 then
    if not counted then write_window(key, start, count + cost, count == 0, period, now, pack) end
    count = count + cost
  end
  local remaining, reset_after = amount - count, 0
  if remaining < 0 then remaining = 0 end
  if count > 0 then reset_after = finish - now end
  if allowed then return allowed_answer(remaining, reset_after) end
  return answer(allowed, amount, period, remaining, reset_after, wait, 0)
end

-- A fixed window's settle (fixed_window::settle), both anchors' clock-aligned scripts: the window
-- at `now` is [start, finish); it takes `delta` if it is the window that held `at`, else a positive
-- delta opens it (a new expiry) and a negative one is dropped.
-- A fixed window's commit, every fixed-window script: `cost` joins the window opening at `start`;
-- a window other than the stored one opens with it (a new expiry: save).
local function window_commit(s, start, cost)
  if s.count == 0 or s.start ~= start then
    s.start = start
    s.count = 0
    s.moved = true
  end
  s.count = sat_add(s.count, cost)  -- never past MAX_COUNT
end

-- The units of the window opening at `start` (0 when the stored state is another window's).
local function window_count(s, start)
  if s.count > 0 and s.start == start then return s.count end
  return 0
end

local function window_settle(s, start, finish, at, delta)
  if delta == 0 then return end
  if s.count > 0 and s.start == start and start <= at and at < finish then
    s.count = sat_add(s.count, delta)  -- never below 0, never past MAX_COUNT
  elseif delta > 0 then
    window_commit(s, start, delta)
  end
  s.changed = true
end

-- A fixed window's decision (window_decision in fixed_window.cpp), every fixed-window script:
-- `count` units are in the window at `now`, which (or the one a hit opens) ends at `finish`.
local function window_decision(l, now, cost, count, finish)
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
