-- Token bucket, leaky bucket (meter and shaper), GCRA: mirrors src/algorithms/bucket.cpp.
-- The C++ keeps tat in units of 1/N µs as a 128-bit integer. Here every such quantity x is a pair
-- (w, r) with x = w·N + r and 0 ≤ r < N: w is whole µs, r the fraction in 1/N µs. The C++ side
-- passes capacity·P and cost·P already split so (computed in 128 bits); the products that remain
-- go through muldiv. State: "w r a" (a string), tat = w·a + r with a the amount N it was written
-- under (rescaled in `load` when the limit's amount changed); absent = {0, 0}.
-- Per limit ARGV: amount N, period P, capacity B, B·P as (cap_w, cap_r), cost·P as (cost_w, cost_r)
-- (when cost > B the C++ passes cap_w + 1, 0: such a request never fits).
local F = 7

local function read_limit(b)
  return {n = tonumber(ARGV[b + 1]), p = tonumber(ARGV[b + 2]), b = tonumber(ARGV[b + 3]),
          cap_w = tonumber(ARGV[b + 4]), cap_r = tonumber(ARGV[b + 5]),
          cost_w = tonumber(ARGV[b + 6]), cost_r = tonumber(ARGV[b + 7])}
end

-- bucket::rescaled: the used level (tat − now·a, in base a) carried over into base N.
local function rescaled(w, r, a, l, now)
  if a == l.n then return w, r end
  if w < now then return now, 0 end
  local q, rr = muldiv(w - now, a, r, l.n)
  return now + q, rr
end

-- The stored tat in base N (both paths): absent = 0, 0.
local function tat(key, l, now)
  local v = redis.call('GET', key)
  if not v then return 0, 0 end
  local w, r, a = fields(v, 3, key)
  if a < 1 or r < 0 or r >= a then foreign(key) end
  return rescaled(w, r, a, l, now)
end

local function load(key, l, now)
  local w, r = tat(key, l, now)
  return {w = w, r = r}
end

-- Pairs (w, r) in base n.
local function less(aw, ar, bw, br) return aw < bw or (aw == bw and ar < br) end
local function add(aw, ar, bw, br, n)
  local r, carry = addmod(ar, br, n)
  return aw + bw + carry, r
end
local function sub(aw, ar, bw, br, n)  -- a ≥ b
  if ar >= br then return aw - bw, ar - br end
  return aw - bw - 1, ar + (n - br)
end
local function ceil_pair(w, r)  -- ⌈x / N⌉ in µs
  if r > 0 then return w + 1 end
  return w
end

-- ⌊(capacity − used_after) / P⌋ (both paths), with capacity = B·P: B − ⌈used_after / P⌉, the
-- same integer. Formed from whichever of used_after and capacity − used_after is the smaller, so
-- that the product in muldiv stays below 2^53 (its fast path) for a nearly empty bucket of a limit
-- whose N·P is large (100000000/hour) as well as for a nearly full one.
local function left(aw, ar, l)
  if not less(aw, ar, l.cap_w, l.cap_r) then return 0 end
  local xw, xr = sub(l.cap_w, l.cap_r, aw, ar, l.n)
  if aw < xw then
    local q, r = muldiv(aw, l.n, ar, l.p)
    if r > 0 then q = q + 1 end
    return l.b - q
  end
  return (muldiv(xw, l.n, xr, l.p))
end

local function evaluate(s, l, now, cost, shape)
  -- now_s = (now, 0); used = max(tat, now_s) − now_s: level·T before this request
  local uw, ur = 0, 0
  if less(now, 0, s.w, s.r) then uw, ur = s.w - now, s.r end
  local cw, cr = l.cost_w, l.cost_r  -- cost·P (the arguments are for the request's cost)
  if cost == 0 then cw, cr = 0, 0 end
  local nw, nr = add(uw, ur, cw, cr, l.n)  -- needed = used + cost·P
  local d = decision(l.n, l.p)
  d.allowed = cost == 0 or not less(l.cap_w, l.cap_r, nw, nr)  -- cost 0: even after a step back
  local aw, ar = uw, ur  -- used_after
  if d.allowed then aw, ar = nw, nr end
  d.remaining = left(aw, ar, l)
  d.reset_after = ceil_pair(aw, ar)
  if d.allowed then
    d.retry_after = 0
    if shape then d.delay = ceil_pair(uw, ur) end
  elseif cost > l.b then
    d.retry_after = NEVER
  else
    local xw, xr = sub(nw, nr, l.cap_w, l.cap_r, l.n)
    d.retry_after = ceil_pair(xw, xr)  -- ⌈(needed − capacity) / N⌉
  end
  return d
end

-- The new tat after admitting cost·P at `now` (both paths).
local function advanced(w, r, l, now)
  local bw, br = now, 0
  if less(now, 0, w, r) then bw, br = w, r end
  w, r = add(bw, br, l.cost_w, l.cost_r, l.n)
  if w >= TWO53 then fail('arithmetic overflow') end
  return w, r
end

local function commit(s, l, now, cost)
  if cost == 0 then return end
  s.w, s.r = advanced(s.w, s.r, l, now)
end

-- The state "w r N" written (both paths).
local function write(key, w, r, l, now)
  redis.call('SET', key, string.format('%d %d %d', w, r, l.n), 'PX', ttl_ms(ceil_pair(w, r), now))
end

local function save(key, s, l, now)
  write(key, s.w, s.r, l, now)
end

-- bucket.cpp's `charged`: tat after `units` more (units·P) are charged at `now`, its level never
-- above MAX_DRAIN µs (kMaxBucketDrain, 2^52: about 142 years). units·P as a pair is
-- ⌊units/N⌋·P + ⌊(units mod N)·P / N⌋ whole µs and (units mod N)·P mod N; a first term past the
-- ceiling is not formed exactly (a double may round it, never below 2^52).
local MAX_DRAIN = 4503599627370496
local function charged(w, r, l, now, units)
  local bw, br = now, 0
  if less(now, 0, w, r) then bw, br = w, r end
  if not less(bw, br, now + MAX_DRAIN, 0) then return bw, br end
  local room_w, room_r = sub(now + MAX_DRAIN, 0, bw, br, l.n)
  local ra = math.fmod(units, l.n)
  local qa = (units - ra) / l.n
  if qa * l.p >= MAX_DRAIN then return now + MAX_DRAIN, 0 end
  local dw, dr = muldiv(ra, l.p, 0, l.n)
  dw = dw + qa * l.p
  if less(room_w, room_r, dw, dr) then return now + MAX_DRAIN, 0 end
  return add(bw, br, dw, dr, l.n)
end

-- bucket::mark: ⌊tat / N⌋, when everything committed so far has drained.
local function mark(s, l) return s.w end

-- A reservation's settle (bucket::settle): a positive delta charged at `now`; a refund of at most
-- what is left of the reservation (committed before `mark`) and of the bucket's level.
local function settle(s, l, now, at, mark, delta)
  if delta == 0 then return end
  if delta > 0 then
    s.w, s.r = charged(s.w, s.r, l, now, delta)
    s.changed = true
    return
  end
  local gw, gr = muldiv(-delta, l.p, 0, l.n)  -- −delta·P
  local lw = 0  -- (mark − now)·N: what is left of the reservation
  if mark > now then lw = mark - now end
  if less(lw, 0, gw, gr) then gw, gr = lw, 0 end
  local vw, vr = 0, 0  -- the level
  if less(now, 0, s.w, s.r) then vw, vr = s.w - now, s.r end
  if less(vw, vr, gw, gr) then gw, gr = vw, vr end
  if gw == 0 and gr == 0 then return end
  s.w, s.r = sub(s.w, s.r, gw, gr, l.n)
  s.changed = true
end
local function settled(key, s, l, now) if s.changed then save(key, s, l, now) end end

-- One limit (decide.lua's `main`): evaluate, commit and save above without the state and decision
-- tables, on the same key and state (tests/integration/redis/redis_paths_test.cpp).
local function fast(key, now, cost, hit, shape)
  local l = read_limit(5)
  local w, r = tat(key, l, now)
  local uw, ur = 0, 0  -- used
  if less(now, 0, w, r) then uw, ur = w - now, r end
  local nw, nr = uw, ur  -- needed
  if cost > 0 then nw, nr = add(uw, ur, l.cost_w, l.cost_r, l.n) end
  if cost > 0 and less(l.cap_w, l.cap_r, nw, nr) then
    local wait = NEVER
    if cost <= l.b then wait = ceil_pair(sub(nw, nr, l.cap_w, l.cap_r, l.n)) end
    return answer(false, l.n, l.p, left(uw, ur, l), ceil_pair(uw, ur), wait, 0)
  end
  local wait = 0
  if shape then wait = ceil_pair(uw, ur) end
  if not hit then return answer(true, l.n, l.p, left(uw, ur, l), ceil_pair(uw, ur), 0, wait) end
  if cost > 0 then
    local tw, tr = advanced(w, r, l, now)
    write(key, tw, tr, l, now)
  end
  if wait == 0 then return allowed_answer(left(nw, nr, l), ceil_pair(nw, nr)) end  -- l.n, l.p: ARGV[6], ARGV[7]
  return answer(true, l.n, l.p, left(nw, nr, l), ceil_pair(nw, nr), 0, wait)
end
