-- wrk script for bench/run.py: POST one JSON body, check each answer, print a JSON summary.
-- Settings come from the environment (bench/run.py sets them):
--   BENCH_BODY    the request body           BENCH_AUTH    the Authorization header value
--   BENCH_EXPECT  a substring a good answer must contain (status 200 too)
wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
local auth = os.getenv("BENCH_AUTH")
if auth and auth ~= "" then wrk.headers["Authorization"] = auth end

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  expect = os.getenv("BENCH_EXPECT") or ""
  good = 0
  bad = 0
  sample = ""
end

function response(status, headers, body)
  if status == 200 and string.find(body, expect, 1, true) then
    good = good + 1
  else
    bad = bad + 1
    if sample == "" then sample = tostring(status) .. " " .. string.sub(body, 1, 200) end
  end
end

function done(summary, latency, requests)
  local g, b, s = 0, 0, ""
  for _, thread in ipairs(threads) do
    g = g + thread:get("good")
    b = b + thread:get("bad")
    local ts = thread:get("sample")
    if s == "" and ts ~= nil then s = ts end
  end
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"mean_us":%.1f,' ..
    '"max_us":%d,"good":%d,"bad":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,' ..
    '"status":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.mean, latency.max, g, b, e.connect, e.read, e.write, e.timeout, e.status))
  io.write("BENCHSAMPLE " .. string.gsub(s, "\n", " ") .. "\n")
end
