-- wrk: GET /v1/auth with X-Real-IP drawn from 10,000 addresses (spreads keys like real traffic).
math.randomseed(42)
request = function()
  local ip = string.format("10.0.%d.%d", math.random(0, 39), math.random(0, 249))
  return wrk.format("GET", nil, { ["X-Real-IP"] = ip })
end
