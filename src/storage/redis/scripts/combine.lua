-- floodgate: how the decisions of several limits combine into one, and the reply's layout
-- (appended to every script after the algorithms). Mirrors `combine` (src/decision.cpp).

local function combine(into, one)
  if into == nil then return one end
  if one.remaining < into.remaining then
    into.limit = one.limit
    into.period = one.period
    into.index = one.index
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

-- The full reply, 7 integers (group.lua, envoyproxy_window.lua).
local function reply(d)
  return {d.allowed and 1 or 0, d.limit, d.period, d.remaining, d.reset_after, d.retry_after,
          d.delay}
end

-- The short reply of decide.lua (common.lua's `answer`): three or four integers instead of seven.
local function brief(d)
  local code = d.index
  if not d.allowed then code = -code end
  local wait = d.retry_after
  if d.allowed then wait = d.delay end
  return answer(code, d.remaining, d.reset_after, wait)
end
