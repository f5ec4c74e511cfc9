-- floodgate: the fixed window in envoyproxy/ratelimit's key layout (storage/envoyproxy_layout.hpp),
-- appended to common.lua, fixed_window.lua and combine.lua (run as `run(main)`, or as a function of
-- the library: see CMakeLists.txt). The decision is fixed_window.lua's
-- `evaluate` (the mirror of src/algorithms/fixed_window.cpp); only the state's form is
-- envoyproxy's: KEYS[1] names the window the caller's clock is in and holds a plain count, which
-- an allowed hit raises with INCRBY and whose TTL it sets with EXPIRE, as envoyproxy's pods do.
--
-- ARGV[1] now in µs (the caller's: the key's window start was taken from it), ARGV[2] cost,
-- ARGV[3] '1' hit / '0' test, ARGV[4] TTL in seconds (envoyproxy's: one unit), ARGV[5] amount,
-- ARGV[6] period in µs (a whole number of seconds). Reply: as every script's (combine.lua).
-- A refused request is not counted (envoyproxy counts it unless
-- STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT; either way the admitted total stays within the limit).

local function main()
  local now = tonumber(ARGV[1])
  local cost = tonumber(ARGV[2])
  local hit = ARGV[3] == '1'
  local l = {amount = tonumber(ARGV[5]), period = tonumber(ARGV[6])}
  local v = redis.call('GET', KEYS[1])
  local s = {start = window_start(now, l.period), count = 0}
  if v then s.count = fields(v, 1, KEYS[1]) end
  local out = evaluate(s, l, now, cost, false)
  if out.allowed and hit then
    if cost > 0 then
      redis.call('INCRBY', KEYS[1], int(cost))
      redis.call('EXPIRE', KEYS[1], ARGV[4])
    end
    return reply(out)
  end
  if not out.allowed then return reply(out) end
  -- A test: the state as it is, with the verdict for `cost` (as decide.lua).
  local as_is = evaluate(s, l, now, 0, false)
  as_is.allowed = out.allowed
  as_is.retry_after = out.retry_after
  return reply(as_is)
end
