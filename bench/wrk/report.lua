-- Shared prelude of every bench workload (bench/run.sh prepends it to the workload script).
--
-- * setup() numbers the wrk threads so each one seeds its own random sequence (see seed_random below);
--   without this every thread would walk the same "random" ids.
-- * done() prints one machine-readable line that bench/run.sh parses. Latencies are in microseconds,
--   duration in microseconds; "status_errors" counts non-2xx/3xx answers, "socket_errors" connect, read,
--   write and timeout errors.

local thread_count = 0

function setup(thread)
   thread_count = thread_count + 1
   thread:set("thread_number", thread_count)
end

-- Called from a workload's init(): a distinct seed per thread and per run.
function seed_random()
   math.randomseed(os.time() * 97 + (thread_number or 0) * 7919)
   -- LuaJIT's first draws after seeding are poorly mixed; discard a few.
   for _ = 1, 10 do math.random() end
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "BENCH_RESULT requests=%d duration_us=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d status_errors=%d socket_errors=%d\n",
      summary.requests, summary.duration,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
      e.status, e.connect + e.read + e.write + e.timeout))
end
