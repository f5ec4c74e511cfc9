-- floodgate: the decision over all limits of a key (appended to every algorithm's script, after
-- combine.lua). Mirrors MemoryStorage's `decide`.

-- The reply of a call's one limit: `allowed_answer` where it says it all.
local function one_reply(d)
  if d.allowed and d.retry_after == 0 and d.delay == 0 and d.limit == tonumber(ARGV[6]) and
      d.period == tonumber(ARGV[7]) then
    return allowed_answer(d.remaining, d.reset_after)
  end
  return reply(d)
end

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
    return one_reply(d)
  end
  if not d.allowed then
    d.delay = 0
    return one_reply(d)
  end
  local as_is = evaluate(s, l, now, 0, false)
  as_is.allowed = true
  as_is.retry_after = d.retry_after
  as_is.delay = d.delay
  return one_reply(as_is)
end

-- Reservations (ARGV[3]: 'r' reserve, 's' settle, 'e' reserve or settle, 'k' whether known,
-- 'n' renew a lease). KEYS[k + 1] is the reservation's record, ARGV[5 + k·F + 1] its time to live
-- in ms. The record holds "at estimate mark…" (one mark per limit) until it is settled, then
-- "settled" until its time to live ends (a second settle changes nothing). ARGV[4] = 'l': the
-- reservations are leases (a concurrency policy): a settle releases the lease whatever its
-- actual, and a lease not outstanding is never charged. Mirrors MemoryStorage::reserve/settle/renew.
local function as_is_reply(limits, states, now)
  local out
  for i = 1, #limits do out = combine(out, evaluate(states[i], limits[i], now, 0, false)) end
  out.allowed = true
  out.retry_after = 0
  out.delay = 0
  return reply(out)
end

-- Whether a lease's record `rec` holds an outstanding lease at `now`: not settled, and its time
-- (taken or renewed) within its limit's period, the lease's time to live.
local function lease_outstanding(rec, l, now)
  if not rec or rec == 'settled' then return false end
  local at, _, mark = string.match(rec, '^(%-?%d+) (%-?%d+) (%-?%d+)')
  at, mark = tonumber(at), tonumber(mark)
  if at == nil or mark == nil then return false end
  if mark > 0 then at = mark end  -- the log's entry that holds the lease (moving_window's mark)
  return at >= now - l.period
end

local function reservation(now, cost, mode)
  local k = #KEYS - 1
  local rkey = KEYS[k + 1]
  local ttl = tonumber(ARGV[5 + k * F + 1])
  local rec = redis.call('GET', rkey)
  if mode == 'k' then return answer(rec ~= false, 0, 0, 0, 0, 0, 0) end
  if rec and mode == 'r' then
    local what = 'outstanding'
    if rec == 'settled' then what = 'settled' end
    return redis.error_reply('floodgate: reservation ' .. what .. ': an id names one request until its time to live ends')
  end
  local limits, states = {}, {}
  for i = 1, k do
    limits[i] = read_limit(5 + (i - 1) * F)
    states[i] = load(KEYS[i], limits[i], now)
  end
  if mode == 'n' then
    -- A renewal: the lease's units leave the log at its time and enter it again now.
    if not lease_outstanding(rec, limits[1], now) then
      return redis.error_reply('floodgate: lease not outstanding')
    end
    local parts = {}
    for w in string.gmatch(rec, '%-?%d+') do parts[#parts + 1] = tonumber(w) end
    if #parts ~= k + 2 then foreign(rkey) end
    local v = {int(now), int(parts[2])}
    for i = 1, k do
      settle(states[i], limits[i], now, parts[1], parts[i + 2], -parts[2])
      settled(KEYS[i], states[i], limits[i], now)
      states[i] = load(KEYS[i], limits[i], now)
      if parts[2] > 0 then
        commit(states[i], limits[i], now, parts[2])  -- never refused: the units were held
        save(KEYS[i], states[i], limits[i], now)
      end
      v[#v + 1] = int(mark(states[i], limits[i]))
      states[i] = load(KEYS[i], limits[i], now)
    end
    redis.call('SET', rkey, table.concat(v, ' '), 'PX', ttl)
    return as_is_reply(limits, states, now)
  end
  if ARGV[4] == 'l' and (mode == 's' or rec) then
    -- A release: nothing for a lease not outstanding; else its units back in full.
    if not lease_outstanding(rec, limits[1], now) then
      if mode == 's' then return redis.error_reply('floodgate: lease not outstanding') end
      return as_is_reply(limits, states, now)
    end
    cost = 0
  end
  if mode == 's' or rec then
    if rec == 'settled' then return as_is_reply(limits, states, now) end
    local at, delta, marks = now, cost, {}
    if rec then
      local parts = {}
      for w in string.gmatch(rec, '%-?%d+') do parts[#parts + 1] = tonumber(w) end
      if #parts ~= k + 2 then foreign(rkey) end
      at, delta = parts[1], cost - parts[2]
      for i = 1, k do marks[i] = parts[i + 2] end
    end
    for i = 1, k do
      settle(states[i], limits[i], now, at, marks[i] or 0, delta)
      settled(KEYS[i], states[i], limits[i], now)
    end
    if rec then
      redis.call('SET', rkey, 'settled', 'KEEPTTL')
    else
      redis.call('SET', rkey, 'settled', 'PX', ttl)
    end
    -- The state after the settle, read again (a settle may have written it in place).
    for i = 1, k do states[i] = load(KEYS[i], limits[i], now) end
    return as_is_reply(limits, states, now)
  end
  -- A reservation: a hit of the estimate, remembered with every limit's mark when admitted.
  local out
  for i = 1, k do out = combine(out, evaluate(states[i], limits[i], now, cost, false)) end
  if not out.allowed then
    out.delay = 0
    local as_is
    for i = 1, k do as_is = combine(as_is, evaluate(states[i], limits[i], now, 0, false)) end
    as_is.allowed = false
    as_is.retry_after = out.retry_after
    as_is.delay = 0
    if k == 1 then return reply(out) end
    return reply(as_is)
  end
  local v = {int(now), int(cost)}
  for i = 1, k do
    if cost > 0 then
      commit(states[i], limits[i], now, cost)
      save(KEYS[i], states[i], limits[i], now)
    end
    v[#v + 1] = int(mark(states[i], limits[i]))
  end
  redis.call('SET', rkey, table.concat(v, ' '), 'PX', ttl)
  return reply(out)
end

local function main()
  local now = now_micros()
  local cost = tonumber(ARGV[2])
  local mode = ARGV[3]
  if mode == 'r' or mode == 's' or mode == 'e' or mode == 'k' or mode == 'n' then
    return reservation(now, cost, mode)
  end
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
