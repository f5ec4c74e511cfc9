-- floodgate: the decision over all limits of a key (appended to every algorithm's script).
-- Mirrors `combine` (src/decision.cpp) and MemoryStorage's `decide`.

local function combine(into, one)
  if into == nil then return one end
  if one.remaining < into.remaining then
    into.limit = one.limit
    into.period = one.period
    into.remaining = one.remaining
  end
  -- retry_after: the maximum over the limits that deny (0 for the ones that allow); never wins.
  if one.retry_after == NEVER or into.retry_after == NEVER then
    into.retry_after = NEVER
  elseif one.retry_after > into.retry_after then
    into.retry_after = one.retry_after
  end
  if one.reset_after > into.reset_after then into.reset_after = one.reset_after end
  if one.delay > into.delay then into.delay = one.delay end
  into.allowed = into.allowed and one.allowed
  return into
end

local function reply(d)
  return {d.allowed and 1 or 0, d.limit, d.period, d.remaining, d.reset_after, d.retry_after,
          d.delay}
end

local function main()
  local now = now_micros()
  local cost = tonumber(ARGV[2])
  local hit = ARGV[3] == '1'
  local shape = ARGV[4] == '1'
  local k = #KEYS
  local limits, states = {}, {}
  for i = 1, k do
    limits[i] = read_limit(5 + (i - 1) * F)
    states[i] = load(KEYS[i], limits[i])
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

local ok, result = pcall(main)
if ok then return result end
if type(result) == 'table' then return result end  -- an error reply of redis.call (WRONGTYPE, OOM…)
return redis.error_reply(tostring(result))
