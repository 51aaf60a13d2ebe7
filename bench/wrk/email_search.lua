-- GET /v2/subscribers?email=user<N>@ : a selective, case-sensitive email substring search (one match:
-- the "@" ends the number), default limit. N is random per request.
-- args: <api key> <subscriber count>

local count

function init(args)
   wrk.headers["Authorization"] = "ApiKey " .. args[1]
   count = tonumber(args[2])
   seed_random()
end

function request()
   return wrk.format("GET", "/v2/subscribers?email=user" .. math.random(count) .. "%40")
end
