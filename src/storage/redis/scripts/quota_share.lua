-- The shared quota (Storage::share_quota): mirrors share_quota_step (src/storage/quota_share.cpp).
-- KEYS[1]  the bucket's hash: member → "expiry granted wants" (wants: integers joined by ',').
-- ARGV[1]  now (µs, the caller's clock); ARGV[2] the member; ARGV[3] its expiry (µs);
-- ARGV[4]  requested; ARGV[5] total; ARGV[6] the member's wants, joined by ','.
-- Reply: {granted, the other live members' wants…} (integers). Every value is an integer below
-- 2^53 (times in µs, tokens below 2^32, at most a few thousand members' grants summed).
local function quota_share()
  local key, now, member, expiry = KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
  local requested, total, wants = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
  local used, out, last = 0, {0}, expiry
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local name, value = all[i], all[i + 1]
    if name ~= member then
      local e, g, w = string.match(value, '^(%-?%d+) (%d+) ([%-%d,]*)$')
      if not e then foreign(key) end
      e = tonumber(e)
      if e <= now then
        redis.call('HDEL', key, name)
      else
        used = used + tonumber(g)
        for x in string.gmatch(w, '%-?%d+') do out[#out + 1] = tonumber(x) end
        if e > last then last = e end
      end
    end
  end
  local free = 0
  if total > used then free = total - used end
  local granted = requested
  if free < granted then granted = free end
  redis.call('HSET', key, member, int(expiry) .. ' ' .. int(granted) .. ' ' .. wants)
  -- The hash outlives its last member by a minute (the expiries are the callers' clock; this is
  -- only the server's garbage collection of buckets no instance syncs any more).
  redis.call('PEXPIRE', key, math.floor((last - now + 999) / 1000) + 60000)
  out[1] = granted
  return out
end
