-- wrk script: POST the JSON message in $OMR_BODY_FILE to /v1/messages; count non-201 answers.
local f = assert(io.open(os.getenv("OMR_BODY_FILE"), "r"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

local bad = 0
response = function(status, headers, body)
  if status ~= 201 then
    bad = bad + 1
  end
end

done = function(summary, latency, requests)
  io.write(string.format("non-201 responses (last thread): %d\n", bad))
  io.write(string.format("p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n",
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000))
  io.write(string.format("requests %d, errors connect %d read %d write %d status %d timeout %d\n",
    summary.requests, summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout))
end
