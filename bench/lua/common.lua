-- Shared by the wrk scripts: one machine-readable result line, parsed by bench/run.ts.
function report(summary, latency)
  io.write(string.format('KWRESULT {"requests":%d,"duration_us":%d,"non2xx":%d,"socket_errors":%d,"p50_us":%d,"p99_us":%d,"p999_us":%d}\n',
    summary.requests, summary.duration, summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
