-- The least a GCRA limiter on Redis can do (a yardstick for src/storage/redis/scripts/bucket.lua,
-- which serves GCRA, token bucket and leaky bucket): one theoretical arrival time per key.
-- KEYS[1] key; ARGV[1] emission interval in µs; ARGV[2] burst tolerance in µs.
-- Returns 1 allowed, 0 denied.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if tat - now > tonumber(ARGV[2]) then return 0 end
tat = tat + interval
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
return 1
