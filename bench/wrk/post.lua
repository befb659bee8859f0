-- wrk script for the served-path benchmarks: POSTs one body (BODY_FILE, raw bytes) with the
-- given headers (HEADERS: "name: value" lines separated by "|"), counts answers by status per
-- thread, and prints one JSON line at the end. Goodput is the 2xx count alone: wrk's own
-- Requests/sec counts refusals too.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  counts = {}
end

wrk.method = "POST"
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.body = f:read("*a")
f:close()
for h in string.gmatch(os.getenv("HEADERS") or "", "[^|]+") do
  local name, value = string.match(h, "^%s*([^:]+):%s*(.-)%s*$")
  if name then wrk.headers[name] = value end
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    local c = t:get("counts")
    for status, n in pairs(c) do total[status] = (total[status] or 0) + n end
  end
  local parts = {}
  for status, n in pairs(total) do table.insert(parts, string.format('"%d":%d', status, n)) end
  io.write(string.format('{"durationUs":%d,"requests":%d,"socketErrors":%d,"statuses":{%s},"p50Us":%d,"p90Us":%d,"p99Us":%d,"meanUs":%.1f}\n',
    summary.duration, summary.requests,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    table.concat(parts, ","), latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean))
end
