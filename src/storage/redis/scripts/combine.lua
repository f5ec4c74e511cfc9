-- floodgate: how the decisions of several limits combine into one, and the reply's layout
-- (appended to every script after the algorithms). Mirrors `combine` (src/decision.cpp).

local function combine(into, one)
  if into == nil then return one end
  -- From the second limit on: the reset of the limit that `limit` and `period` name.
  if into.limit_reset_after == nil then into.limit_reset_after = into.reset_after end
  if one.remaining < into.remaining then
    into.limit = one.limit
    into.period = one.period
    into.remaining = one.remaining
    into.limit_reset_after = one.reset_after
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

-- The reply of a decision (common.lua's `answer`).
local function reply(d)
  return answer(d.allowed, d.limit, d.period, d.remaining, d.reset_after, d.retry_after, d.delay,
                d.limit_reset_after)
end
