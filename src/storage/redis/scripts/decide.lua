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
-- in µs. The record holds "r <expires> <at> <estimate> <mark>…" (one mark per limit) until it is
-- settled, then "s <expires>" (a second settle changes nothing). `expires` is on the decision's
-- clock (`now`): from then on the record is absent, exactly as the memory store's entry (the key's
-- own TTL, on Redis's clock, is only its garbage collection: never shorter, ARGV[5] longer with a
-- client clock). ARGV[4] = 'l': the reservations are leases (a concurrency policy): a settle
-- releases the lease whatever its actual, and a lease not outstanding is never charged. Mirrors
-- MemoryStorage::reserve/settle/renew/known.
-- A settle's reply carries what happened to its id (SettleOutcome) as a 9th word: 1 settled,
-- 2 unknown, 3 already settled.
local function as_is_reply(limits, states, now, outcome)
  local out
  for i = 1, #limits do out = combine(out, evaluate(states[i], limits[i], now, 0, false)) end
  out.allowed = true
  out.retry_after = 0
  out.delay = 0
  if not outcome then return reply(out) end
  out.limit_reset_after = out.limit_reset_after or 0
  return reply(out) .. ' ' .. outcome
end

-- The record at `rkey` as it stands at `now`: nil when absent or expired, else {settled, at,
-- estimate, marks, expires}. A record written before records carried their expiry ("<at>
-- <estimate> <mark>…", "settled") has none: it lives while its key does, as it was written to.
local function read_record(rkey, now)
  local rec = redis.call('GET', rkey)
  if not rec then return nil end
  if rec == 'settled' then return {settled = true} end
  local parts = {}
  for w in string.gmatch(rec, '%-?%d+') do parts[#parts + 1] = tonumber(w) end
  local head, first = string.sub(rec, 1, 2), 1
  local r = {marks = {}}
  if head == 's ' or head == 'r ' then
    r.expires, first = parts[1], 2
    if r.expires == nil then foreign(rkey) end
    if r.expires <= now then return nil end
    if head == 's ' then
      r.settled = true
      return r
    end
  end
  r.at, r.estimate = parts[first], parts[first + 1]
  if r.at == nil or r.estimate == nil then foreign(rkey) end
  for i = first + 2, #parts do r.marks[#r.marks + 1] = parts[i] end
  return r
end

-- Sets the record: `value` until `expires` (decision's clock), its key kept that long (whole ms,
-- rounded up) plus the client clock's margin.
local function write_record(rkey, value, expires, now)
  redis.call('SET', rkey, value, 'PX', math.max(1, div(expires - now + 999, 1000)) + tonumber(ARGV[5]))
end

-- Whether a lease's record `r` holds an outstanding lease at `now`: not settled, and its time
-- (taken or renewed) within its limit's period, the lease's time to live.
local function lease_outstanding(r, l, now)
  if not r or r.settled then return false end
  local at = r.at
  if (r.marks[1] or 0) > 0 then at = r.marks[1] end  -- the log's entry that holds the lease (moving_window's mark)
  return at >= now - l.period
end

local function reservation(now, cost, mode)
  local k = #KEYS - 1
  local rkey = KEYS[k + 1]
  local ttl = tonumber(ARGV[5 + k * F + 1])
  local rec = read_record(rkey, now)
  if mode == 'k' then return answer(rec ~= nil, 0, 0, 0, 0, 0, 0) end
  if rec and mode == 'r' then
    local what = 'outstanding'
    if rec.settled then what = 'settled' end
    return redis.error_reply('floodgate: reservation ' .. what .. ': an id names one request until its time to live ends')
  end
  local limits, states = {}, {}
  for i = 1, k do
    limits[i] = read_limit(5 + (i - 1) * F)
    states[i] = load(KEYS[i], limits[i], now)
  end
  if rec and not rec.settled and #rec.marks ~= k then foreign(rkey) end
  if mode == 'n' then
    -- A renewal: the lease's units leave the log at its time and enter it again now.
    if not lease_outstanding(rec, limits[1], now) then
      return redis.error_reply('floodgate: lease not outstanding')
    end
    local v = {'r', int(now + ttl), int(now), int(rec.estimate)}
    for i = 1, k do
      settle(states[i], limits[i], now, rec.at, rec.marks[i], -rec.estimate)
      settled(KEYS[i], states[i], limits[i], now)
      states[i] = load(KEYS[i], limits[i], now)
      if rec.estimate > 0 then
        commit(states[i], limits[i], now, rec.estimate)  -- never refused: the units were held
        save(KEYS[i], states[i], limits[i], now)
      end
      v[#v + 1] = int(mark(states[i], limits[i]))
      states[i] = load(KEYS[i], limits[i], now)
    end
    write_record(rkey, table.concat(v, ' '), now + ttl, now)
    return as_is_reply(limits, states, now)
  end
  if ARGV[4] == 'l' and (mode == 's' or rec) then
    -- A release: nothing for a lease not outstanding; else its units back in full.
    if not lease_outstanding(rec, limits[1], now) then
      if mode == 's' then return redis.error_reply('floodgate: lease not outstanding') end
      if rec and rec.settled then return as_is_reply(limits, states, now, 3) end
      return as_is_reply(limits, states, now, 2)
    end
    cost = 0
  end
  if mode == 's' or rec then
    if rec and rec.settled then return as_is_reply(limits, states, now, 3) end
    local at, delta, marks = now, cost, {}
    if rec then at, delta, marks = rec.at, cost - rec.estimate, rec.marks end
    for i = 1, k do
      settle(states[i], limits[i], now, at, marks[i] or 0, delta)
      settled(KEYS[i], states[i], limits[i], now)
    end
    if rec and rec.expires then
      redis.call('SET', rkey, 's ' .. int(rec.expires), 'KEEPTTL')
    elseif rec then
      redis.call('SET', rkey, 'settled', 'KEEPTTL')  -- a record without expiry: its key's TTL decides
    else
      write_record(rkey, 's ' .. int(now + ttl), now + ttl, now)
    end
    -- The state after the settle, read again (a settle may have written it in place).
    for i = 1, k do states[i] = load(KEYS[i], limits[i], now) end
    if rec then return as_is_reply(limits, states, now, 1) end
    return as_is_reply(limits, states, now, 2)
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
  local v = {'r', int(now + ttl), int(now), int(cost)}
  for i = 1, k do
    if cost > 0 then
      commit(states[i], limits[i], now, cost)
      save(KEYS[i], states[i], limits[i], now)
    end
    v[#v + 1] = int(mark(states[i], limits[i]))
  end
  write_record(rkey, table.concat(v, ' '), now + ttl, now)
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
