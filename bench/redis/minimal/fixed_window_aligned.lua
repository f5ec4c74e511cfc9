-- The least a clock-aligned fixed-window limiter on the server's clock can do (a second yardstick
-- for src/storage/redis/scripts/fixed_window.lua, beside fixed_window.lua, whose window starts at
-- the first hit and needs no clock): TIME, one counter per window, its expiry on the first hit.
-- floodgate_redis_benchmark runs it against the clock-aligned fixed window (bench/redis_benchmark.cpp).
-- KEYS[1] counter prefix; ARGV[1] limit; ARGV[2] window in ms. Returns 1 allowed, 0 denied.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local period = tonumber(ARGV[2])
local key = KEYS[1] .. ':' .. (now - now % period)
local n = redis.call('INCR', key)
if n == 1 then redis.call('PEXPIRE', key, period) end
if n > tonumber(ARGV[1]) then return 0 end
return 1
