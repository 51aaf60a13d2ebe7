-- GET /v1/notifications?limit=<limit>: the activity feed (notifications with their jobs and execution details).
-- With one page it always reads the newest page (no page parameter, i.e. page 0); with more, a random page
-- 0..pages-1 per request.
-- args: <api key> <page size> <pages>

local limit, pages

function init(args)
   wrk.headers["Authorization"] = "ApiKey " .. args[1]
   limit = args[2]
   pages = tonumber(args[3])
   seed_random()
end

function request()
   if pages <= 1 then
      return wrk.format("GET", "/v1/notifications?limit=" .. limit)
   end
   return wrk.format("GET", "/v1/notifications?limit=" .. limit .. "&page=" .. (math.random(pages) - 1))
end
