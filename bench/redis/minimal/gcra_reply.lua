-- gcra.lua with the answer a caller of a rate limiter reads besides allowed/denied: how many more
-- requests fit now, how long until a denied request would pass, and how long until the key is
-- back to empty (the four numbers redis-cell's CL.THROTTLE answers), as one string. Floats, no
-- costs, no multi-limits. A second yardstick for src/storage/redis/scripts/bucket.lua beside
-- gcra.lua, whose reply is 1 or 0: floodgate_redis_benchmark prints both.
-- KEYS[1] key; ARGV[1] emission interval in µs; ARGV[2] burst tolerance in µs.
-- Returns "allowed remaining retry_after_us reset_after_us".
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if tat - now > tolerance then
  return string.format('0 0 %d %d', tat - now - tolerance, tat - now)
end
tat = tat + interval
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
return string.format('1 %d 0 %d', math.floor((tolerance + interval - (tat - now)) / interval), tat - now)
