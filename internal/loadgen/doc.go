// Package loadgen is the engine of `floodgate bench`: a closed-loop gRPC
// load generator for floodgate's two APIs and for grpc.health.v1, the
// same server's bare gRPC ceiling.
//
// # Model
//
// Config.Concurrency workers each keep exactly one request in flight: a
// worker sends its next request when the previous one was answered (a
// closed loop), so the offered load adapts to the server and the measured
// rate is the server's throughput at that concurrency. Workers are spread
// round-robin over Config.Conns. Every request is built before the run
// (one per key), each worker reuses one reply message and keeps its own
// counters and Histogram, merged at the end, so the generator allocates
// only what grpc-go allocates per call and never contends on a lock.
//
// A run warms up for Config.Warmup (sent, not measured), then measures
// for Config.Duration or until Config.MaxRequests were measured, or until
// its context ends (SIGINT): the result so far is then returned, marked
// Interrupted. Only requests both sent and answered during the
// measurement count, and the rates divide by the measured time.
// Config.MeasureHook is called as the measurement begins and ends, so a
// caller can read other counters (the server's CPU, Redis' INFO) over the
// same interval (bench/loadtest does).
//
// # Requests
//
//   - check: floodgate.v1.RateLimiter/Check{key: "bench:<i>", algorithm,
//     cost: 1, limit: {requests, period}} (an inline limit; burst =
//     requests). Allowed is CheckResponse.allowed.
//   - rls: ShouldRateLimit{domain, descriptors: [[(bench_key, bench:<i>)],
//     [(bench_key2, bench:<i>)], ...]}, Config.Descriptors of them. The
//     server needs a config with a rule per descriptor key: RLSConfig
//     writes it (`floodgate bench --print-config`). Allowed is overall_code
//     OK. An unknown domain or key is always OK, which would measure no
//     rate limiting at all: check that the run shows denials with a small
//     limit.
//   - health: grpc.health.v1.Health/Check{service: ""}. Allowed is SERVING.
//
// Key i is drawn uniformly from [0, Keys), or from a Zipf distribution
// with skew Config.Zipf (> 1) where key 0 is the most frequent. The key
// names are the same in every run, so a second run against the same
// server starts from the state the first one left (e.g. drained buckets).
//
// # Latency histogram
//
// Histogram is log-linear (as HdrHistogram with two significant digits):
// exact below 256ns, then 128 buckets per power of two up to MaxLatency
// (60s), so every reported latency is within Precision (1/128, under 1%)
// of a recorded one. Record never allocates; a histogram is 30 KiB.
//
// # JSON report
//
// `floodgate bench --json` prints one Report object. Its field names are
// stable (fields may be added, never renamed or removed):
//
//	api                   "check", "rls" or "health"
//	target                the server address
//	concurrency           workers (requests in flight)
//	conns                 gRPC connections
//	keys                  distinct keys (check and rls only)
//	zipf                  Zipf skew; absent when keys are uniform
//	algorithm, limit      check only: the algorithm's name, e.g. "100/1s"
//	descriptors, domain   rls only
//	warmup_seconds        warmup time (not measured)
//	elapsed_seconds       measured time
//	requests              measured requests = allowed + denied + errors
//	allowed, denied       decisions (see Requests above)
//	errors                failed RPCs
//	errors_by_code        failed RPCs by gRPC code name, e.g. {"Unavailable": 3}
//	requests_per_second   requests / elapsed_seconds
//	decisions_per_second  (allowed + denied) / elapsed_seconds
//	latency_us            {min, mean, p50, p90, p99, p99_9, max} in microseconds,
//	                      over every measured request, errors included
//	histogram             [{from_us, to_us, count}]: requests that took at
//	                      least from_us and less than to_us (edges 1, 1.5,
//	                      2, 3, 5, 7 × 10^k ns), from the fastest to the
//	                      slowest request
//	interrupted           true when the run was stopped early (SIGINT)
//	generator_cpu         {cores, us_per_request}: the load generator's own
//	                      CPU use while measuring (the whole process; 0 where
//	                      the platform does not report it, i.e. not Unix).
//	                      On a shared machine, cores near the machine's count
//	                      mean the generator, not the server, is the limit.
package loadgen
