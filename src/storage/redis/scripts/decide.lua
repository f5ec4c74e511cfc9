-- floodgate: the decision over all limits of a key (appended to every algorithm's script, after
-- combine.lua). Mirrors MemoryStorage's `decide`.

-- One limit (the common case): `main` without the tables of limits and states.
local function single(now, cost, hit, shape)
  local key, l = KEYS[1], read_limit(5)
  local s = load(key, l, now)
  local d = evaluate(s, l, now, cost, shape)
  if d.allowed and hit then
    if cost > 0 then
      commit(s, l, now, cost)
      save(key, s, l, now)
    end
    return reply(d)
  end
  if not d.allowed then
    d.delay = 0
    return reply(d)
  end
  local as_is = evaluate(s, l, now, 0, false)
  as_is.allowed = true
  as_is.retry_after = d.retry_after
  as_is.delay = d.delay
  return reply(as_is)
end

local function main()
  local now = now_micros()
  local cost = tonumber(ARGV[2])
  local hit = ARGV[3] == '1'
  local shape = ARGV[4] == '1'
  local k = #KEYS
  if k == 1 then
    if fast then return fast(KEYS[1], now, cost, hit, shape) end
    return single(now, cost, hit, shape)
  end
  local limits, states = {}, {}
  for i = 1, k do
    limits[i] = read_limit(5 + (i - 1) * F)
    states[i] = load(KEYS[i], limits[i], now)
  end
  local out
  for i = 1, k do
    local d = evaluate(states[i], limits[i], now, cost, shape)
    out = combine(out, d)
  end
  if out.allowed and hit then
    if cost > 0 then
      for i = 1, k do
        commit(states[i], limits[i], now, cost)
        save(KEYS[i], states[i], limits[i], now)
      end
    end
    return reply(out)
  end
  if not out.allowed then out.delay = 0 end
  -- Nothing was consumed: report the state as it is, with the verdict for `cost`.
  local as_is
  for i = 1, k do
    local d = evaluate(states[i], limits[i], now, 0, false)
    as_is = combine(as_is, d)
  end
  as_is.allowed = out.allowed
  as_is.retry_after = out.retry_after
  as_is.delay = out.delay
  return reply(as_is)
end
