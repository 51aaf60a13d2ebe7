-- GET /v2/subscribers/{subscriberId} for a random seeded subscriber.
-- args: <api key> <subscriber count> <subscriberId prefix>

local count, prefix

function init(args)
   wrk.headers["Authorization"] = "ApiKey " .. args[1]
   count = tonumber(args[2])
   prefix = args[3]
   seed_random()
end

function request()
   return wrk.format("GET", "/v2/subscribers/" .. prefix .. math.random(count))
end
