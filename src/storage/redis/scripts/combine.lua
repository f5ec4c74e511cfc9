-- floodgate: how the decisions of several limits combine into one, and the reply's layout
-- (appended to every script after the algorithms). Mirrors `combine` (src/decision.cpp).

local function combine(into, one)
  if into == nil then return one end
  -- From the second limit on: the reset of the limit that `limit` and `period` name, and each
  -- limit's own remaining and reset (Decision::balances), the first's before it changes.
  if into.limit_reset_after == nil then into.limit_reset_after = into.reset_after end
  if into.balances == nil then into.balances = {into.remaining, into.reset_after} end
  into.balances[#into.balances + 1] = one.remaining
  into.balances[#into.balances + 1] = one.reset_after
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

-- The reply of a decision (common.lua's `answer`); after several limits, each limit's remaining
-- and reset follow, two words a limit.
local function reply(d)
  local out = answer(d.allowed, d.limit, d.period, d.remaining, d.reset_after, d.retry_after, d.delay,
                     d.limit_reset_after)
  if d.balances == nil then return out end
  local words = {out}
  for i = 1, #d.balances do words[i + 1] = string.format('%d', d.balances[i]) end
  return table.concat(words, ' ')
end
