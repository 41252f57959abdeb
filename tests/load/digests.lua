-- wrk script: GET /v1/digests/{key_id} round-robin over many registered keys, each request with
-- its key's own access token. $OMR_KEYS_FILE holds one "key_id token" pair per line.
-- Each wrk thread starts at a different offset so connections do not ask for the same key in
-- lock step. Each request names one of $OMR_LOAD_CLIENTS client addresses (198.18.0.0/15) in
-- X-Forwarded-For. done() prints one JSON line (prefixed "REPORT ") for digests.sh to pick up.

local keys = {}
for line in io.lines(os.getenv("OMR_KEYS_FILE")) do
  local id, token = line:match("^(%S+)%s+(%S+)$")
  if id then
    keys[#keys + 1] = { path = "/v1/digests/" .. id, auth = "Bearer " .. token }
  end
end
assert(#keys > 0, "no keys in OMR_KEYS_FILE")

local clients = tonumber(os.getenv("OMR_LOAD_CLIENTS") or "65536")

local thread_no = 0
setup = function(thread)
  thread:set("offset", thread_no * 7)
  thread_no = thread_no + 1
end

init = function(args)
  math.randomseed(os.time() + (offset or 0) * 7919)
end

local i = 0
request = function()
  i = i + 1
  local k = keys[((i + (offset or 0)) % #keys) + 1]
  local c = math.random(0, clients - 1)
  local client = string.format("198.%d.%d.%d", 18 + math.floor(c / 65536) % 2,
    math.floor(c / 256) % 256, c % 256)
  return wrk.format("GET", k.path, { ["Authorization"] = k.auth, ["X-Forwarded-For"] = client })
end

local bad, bytes = 0, 0
response = function(status, headers, body)
  if status ~= 200 then
    bad = bad + 1
  else
    bytes = bytes + #body
  end
end

done = function(summary, latency, requests)
  local secs = summary.duration / 1e6
  local errors = summary.errors
  io.write(string.format(
    'REPORT {"requests": %d, "seconds": %.2f, "rps": %.1f, "p50_ms": %.2f, "p90_ms": %.2f, ' ..
    '"p95_ms": %.2f, "p99_ms": %.2f, "max_ms": %.2f, "mean_ms": %.2f, "bytes": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, "keys": %d}\n',
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, latency.mean / 1000, summary.bytes,
    errors.connect, errors.read, errors.write, errors.status, errors.timeout, #keys))
end
