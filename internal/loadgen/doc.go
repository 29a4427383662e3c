// Package loadgen is the engine of `floodgate bench`: a closed-loop gRPC
// load generator for floodgate's two APIs and for grpc.health.v1, the
// same server's bare gRPC ceiling.
//
// # Model
//
// Config.Concurrency workers, spread round-robin over Config.Conns, each
// keep one request in flight (a closed loop), so the measured rate is the
// server's throughput at that concurrency. Requests are built before the
// run, and each worker keeps its own reply, counters and Histogram (merged
// at the end): the generator allocates only what grpc-go does and takes
// no lock.
//
// A run warms up for Config.Warmup (not measured), then measures for
// Config.Duration, Config.MaxRequests or until its context ends (the
// result so far is returned, marked Interrupted). Only requests sent and
// answered during the measurement count.
//
// # Requests
//
//   - check: Check{key: "bench:<i>", algorithm, cost: 1, inline limit with
//     burst = requests}. Allowed is CheckResponse.allowed.
//   - rls: ShouldRateLimit{domain, Config.Descriptors descriptors
//     [(bench_key, bench:<i>)], [(bench_key2, bench:<i>)], ...}; the server
//     needs RLSConfig's rules (`floodgate bench --print-config`), else every
//     answer is OK. Allowed is overall_code OK.
//   - health: grpc.health.v1.Health/Check. Allowed is SERVING.
//
// Key i is uniform in [0, Keys), or Zipf with skew Config.Zipf (key 0 the
// most frequent). Key names are the same in every run.
//
// # Latency histogram
//
// Histogram is log-linear: exact below 256ns, then 128 buckets per power
// of two up to maxLatency, so a reported latency is within precision of a
// recorded one. Record never allocates.
//
// # JSON report
//
// `floodgate bench --json` prints one Report; its field names are stable:
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
//	generator_cpu         {cores, us_per_request}: the generator's own CPU
//	                      while measuring (0 where not Unix); cores near the
//	                      machine's count mean the generator is the limit
package loadgen
