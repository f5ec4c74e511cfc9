-- The least a sliding-window-counter limiter on Redis can do (a yardstick for
-- src/storage/redis/scripts/sliding_window.lua): one hash per key, a field per window.
-- KEYS[1] hash; ARGV[1] limit; ARGV[2] window in ms. Returns 1 allowed, 0 denied.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local period = tonumber(ARGV[2])
local w = math.floor(now / period)
local prev = tonumber(redis.call('HGET', KEYS[1], w - 1) or '0')
local cur = tonumber(redis.call('HGET', KEYS[1], w) or '0')
local weighted = math.floor(prev * (period - (now - w * period)) / period)
if weighted + cur + 1 > tonumber(ARGV[1]) then return 0 end
redis.call('HINCRBY', KEYS[1], w, 1)
redis.call('HDEL', KEYS[1], w - 2)
redis.call('PEXPIRE', KEYS[1], 2 * period)
return 1
