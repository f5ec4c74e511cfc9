-- The least a moving-window (log) limiter on Redis can do (a yardstick for
-- src/storage/redis/scripts/moving_window.lua): one sorted set of hit times per key.
-- KEYS[1] sorted set; ARGV[1] limit; ARGV[2] window in µs. Returns 1 allowed, 0 denied.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now, now .. '-' .. math.random(1000000))
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return 1
