-- floodgate: several requests decided as one, all or nothing (RedisStorage::apply_group; mirrors
-- the default Storage::apply_group run under a lock). The build puts every algorithm's file in
-- ALG[script id + 1] (a table of its functions), then combine.lua, then this file.
--
-- KEYS     every item's keys (one per limit), item after item.
-- ARGV[1]  now, or '' for the server's TIME;  ARGV[2] the number of items;  ARGV[5] TTL slack (ms).
-- ARGV[6…] per item: script id + 1, number of limits k, cost, hit '1'/'0', shape '1'/'0',
--          optional '1'/'0' (its denial does not stop the others: a shadow-mode rule), then the
--          k limits' arguments (F each, as in the algorithm's file).
-- Reply:   {committed 1/0, then per item the string of reply()}.
--
-- The items' keys are distinct (the C++ side sends a group with a key used twice the other way).
-- If no required item is denied, every allowed hit is written; otherwise nothing is, and each item
-- reports the state as it is, with its own verdict.

local function group()
  local now = now_micros()
  local n = tonumber(ARGV[2])
  local items = {}
  local pos, kpos = 6, 1
  for j = 1, n do
    local A = ALG[tonumber(ARGV[pos])]
    local it = {A = A, k = tonumber(ARGV[pos + 1]), cost = tonumber(ARGV[pos + 2]),
                hit = ARGV[pos + 3] == '1', shape = ARGV[pos + 4] == '1',
                optional = ARGV[pos + 5] == '1', limits = {}, keys = {}}
    for i = 1, it.k do
      it.limits[i] = A.read_limit(pos + 5 + (i - 1) * A.F)
      it.keys[i] = KEYS[kpos]
      kpos = kpos + 1
    end
    pos = pos + 6 + it.k * A.F
    items[j] = it
  end

  -- The item's state as it is, with `verdict`'s answer for its cost (decide.lua's as_is).
  local function as_is(it, verdict)
    if not verdict.allowed then verdict.delay = 0 end
    if not verdict.allowed and it.k == 1 then return verdict end  -- already the state as it is
    local d
    for i = 1, it.k do d = combine(d, it.A.evaluate(it.states[i], it.limits[i], now, 0, false)) end
    d.allowed = verdict.allowed
    d.retry_after = verdict.retry_after
    d.delay = verdict.allowed and verdict.delay or 0
    return d
  end

  local go = true
  for j = 1, n do
    local it = items[j]
    it.states = {}
    for i = 1, it.k do it.states[i] = it.A.load(it.keys[i], it.limits[i], now) end
    local d
    for i = 1, it.k do d = combine(d, it.A.evaluate(it.states[i], it.limits[i], now, it.cost, it.shape)) end
    it.d = d
    if not d.allowed and not it.optional then go = false end
  end

  local r = {go and 1 or 0}
  for j = 1, n do
    local it = items[j]
    local d = it.d
    if go and d.allowed and it.hit then
      if it.cost > 0 then
        for i = 1, it.k do
          it.A.commit(it.states[i], it.limits[i], now, it.cost)
          it.A.save(it.keys[i], it.states[i], it.limits[i], now)
        end
      end
    else
      d = as_is(it, d)
    end
    r[j + 1] = reply(d)
  end
  return r
end
