-- GET /v1/channel-endpoints?limit=100&subscriberId=<prefix><N>: the endpoints of one random seeded owner
-- (seed-channel-endpoints gives endpoint n to subscriberId <prefix><n % owners>, so N runs 0..owners-1).
-- args: <api key> <owner count> <subscriberId prefix>

local owners, prefix

function init(args)
   wrk.headers["Authorization"] = "ApiKey " .. args[1]
   owners = tonumber(args[2])
   prefix = args[3]
   seed_random()
end

function request()
   return wrk.format("GET", "/v1/channel-endpoints?limit=100&subscriberId=" .. prefix .. (math.random(owners) - 1))
end
