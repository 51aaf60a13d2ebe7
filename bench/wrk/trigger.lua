-- POST /v1/events/trigger: one event per request, or POST /v1/events/trigger/bulk with <events per request>
-- events when that is more than 1. Each event triggers <workflow> for a random seeded subscriber
-- <prefix>1..<prefix><subscriber count> with a random payload: payload.n, or — <payload> "order", the deliveries
-- workload's email step — payload.order and payload.total.
-- args: <api key> <workflow identifier> <subscriber count> <subscriberId prefix> <events per request> [<payload>]

local workflow, count, prefix, per_request, path, order

function init(args)
   wrk.headers["Authorization"] = "ApiKey " .. args[1]
   wrk.headers["Content-Type"] = "application/json"
   workflow = args[2]
   count = tonumber(args[3])
   prefix = args[4]
   per_request = tonumber(args[5])
   order = args[6] == "order"
   path = per_request > 1 and "/v1/events/trigger/bulk" or "/v1/events/trigger"
   seed_random()
end

local function event()
   if order then
      return string.format('{"name":"%s","to":"%s%d","payload":{"order":"A-%d","total":"%d.%02d"}}',
         workflow, prefix, math.random(count), math.random(1000000000), math.random(500), math.random(0, 99))
   end
   return string.format('{"name":"%s","to":"%s%d","payload":{"n":%d}}',
      workflow, prefix, math.random(count), math.random(1000000000))
end

function request()
   if per_request <= 1 then
      return wrk.format("POST", path, nil, event())
   end
   local events = {}
   for i = 1, per_request do
      events[i] = event()
   end
   return wrk.format("POST", path, nil, '{"events":[' .. table.concat(events, ",") .. "]}")
end
