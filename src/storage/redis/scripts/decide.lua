-- floodgate: the decision over all limits of a key (appended to every algorithm's script, after
-- combine.lua). Mirrors MemoryStorage's `decide`.

local function main()
  local now = now_micros()
  local cost = tonumber(ARGV[2])
  local hit = ARGV[3] == '1'
  local shape = ARGV[4] == '1'
  local k = #KEYS
  local limits, states = {}, {}
  for i = 1, k do
    limits[i] = read_limit(5 + (i - 1) * F)
    states[i] = load(KEYS[i], limits[i], now)
  end
  local out
  for i = 1, k do out = combine(out, evaluate(states[i], limits[i], now, cost, shape)) end
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
  if not out.allowed and k == 1 then return reply(out) end
  -- Nothing was consumed: report the state as it is, with the verdict for `cost`.
  local as_is
  for i = 1, k do as_is = combine(as_is, evaluate(states[i], limits[i], now, 0, false)) end
  as_is.allowed = out.allowed
  as_is.retry_after = out.retry_after
  as_is.delay = out.delay
  return reply(as_is)
end
