-- GET /v1/health-check: the ceiling (no auth, no storage).
-- The request is built per call, like the other workloads, so the load generator does the same work.

function init(args)
   seed_random()
end

function request()
   return wrk.format("GET", "/v1/health-check")
end
