-- wrk script: POST the JSON message in $OMR_BODY_FILE to /v1/messages, each request with a
-- payload of its own (omrd refuses an exact replay as 409 duplicate_message); count non-201
-- answers.
-- Each request names a client in X-Forwarded-For, drawn from $OMR_LOAD_CLIENTS addresses
-- (default 65536) of 198.18.0.0/15, the benchmarking range: omrd, trusting 127.0.0.1 as a
-- proxy, rate-limits each separately, as it would real clients behind a load balancer.
local f = assert(io.open(os.getenv("OMR_BODY_FILE"), "r"))
local clue = assert(string.match(f:read("*a"), '"clue"%s*:%s*"([^"]+)"'), "no clue in the body")
f:close()
local sent = 0
local clients = tonumber(os.getenv("OMR_LOAD_CLIENTS") or "65536")
local headers = { ["Content-Type"] = "application/json" }

local thread_no = 0
setup = function(thread)
  thread:set("seed", thread_no)
  thread_no = thread_no + 1
end

init = function(args)
  math.randomseed(os.time() + (seed or 0) * 7919)
end

request = function()
  local c = math.random(0, clients - 1)
  headers["X-Forwarded-For"] = string.format("198.%d.%d.%d", 18 + math.floor(c / 65536) % 2,
    math.floor(c / 256) % 256, c % 256)
  -- Twelve digits are valid base64 (9 bytes): the thread's number and a counter make each
  -- request's payload, and so its message, unique.
  sent = sent + 1
  local payload = string.format("%04d%08d", (seed or 0) % 10000, sent % 100000000)
  local body = string.format('{"clue":"%s","payload":"%s"}', clue, payload)
  return wrk.format("POST", nil, headers, body)
end

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
