-- The least a fixed-window limiter on Redis can do (a yardstick for the server cost of
-- src/storage/redis/scripts/fixed_window.lua, not a limiter to use: no costs, no multi-limits,
-- no state report, a window that starts at the first hit).
-- KEYS[1] counter; ARGV[1] limit; ARGV[2] window in ms. Returns 1 allowed, 0 denied.
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if n > tonumber(ARGV[1]) then return 0 end
return 1
