-- The least a multi-limit GCRA limiter on Redis can do (a yardstick for "GCRA, two limits" of
-- src/storage/redis/scripts/bucket.lua): gcra.lua over every key given; all must allow, then all
-- are written. floodgate_redis_benchmark runs it against a GCRA policy of several limits.
-- KEYS[i] limit i; ARGV[2i-1], ARGV[2i] its emission interval and burst tolerance in µs.
-- Returns 1 allowed, 0 denied.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local tats = {}
for i = 1, #KEYS do
  local interval, tolerance = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  if tat - now > tolerance then return 0 end
  tats[i] = tat + interval
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], string.format('%d', tats[i]), 'PX', math.ceil((tats[i] - now) / 1000) + 1)
end
return 1
