-- GET /v1/channel-endpoints?limit=100&contextKeys=tenant:t<N>: the endpoints of one random seeded context
-- (seed-channel-endpoints gives endpoint n the context key tenant:t<n % contexts>, so N runs 0..contexts-1).
-- args: <api key> <context count>

local contexts

function init(args)
   wrk.headers["Authorization"] = "ApiKey " .. args[1]
   contexts = tonumber(args[2])
   seed_random()
end

function request()
   return wrk.format("GET", "/v1/channel-endpoints?limit=100&contextKeys=tenant:t" .. (math.random(contexts) - 1))
end
