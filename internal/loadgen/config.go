package loadgen

import (
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"

	"github.com/floodgate/floodgate/algorithms"
)

// API is the RPC a run sends.
type API int

// The APIs.
const (
	// APICheck sends floodgate.v1.RateLimiter/Check with an inline limit.
	APICheck API = iota + 1
	// APIRLS sends envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit.
	APIRLS
	// APIHealth sends grpc.health.v1.Health/Check: the same server's bare
	// gRPC ceiling, with no rate-limit work behind it.
	APIHealth
	// APIRLQS opens envoy.service.rate_limit_quota.v3 streams and reports
	// bucket usage on them (RunRLQS, not Run).
	APIRLQS
)

var apiNames = map[API]string{APICheck: "check", APIRLS: "rls", APIHealth: "health", APIRLQS: "rlqs"}

// String is the --api name: check, rls or health.
func (a API) String() string {
	if n, ok := apiNames[a]; ok {
		return n
	}
	return "api(" + strconv.Itoa(int(a)) + ")"
}

// ParseAPI reads an --api name.
func ParseAPI(s string) (API, error) {
	for a, n := range apiNames {
		if n == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("unknown api %q (want check, rls, health or rlqs)", s)
}

// DescriptorKey is the descriptor key of the i-th descriptor (from 0) of
// every ShouldRateLimit request: "bench_key", "bench_key2", "bench_key3", ...
func DescriptorKey(i int) string {
	if i == 0 {
		return "bench_key"
	}
	return "bench_key" + strconv.Itoa(i+1)
}

// KeyName is the name of the i-th key (from 0): the Check request's key,
// and the value of every descriptor entry of a ShouldRateLimit request.
func KeyName(i int) string { return "bench:" + strconv.Itoa(i) }

// Config describes a run. Conns, API, Concurrency and one of Duration or
// MaxRequests are required.
type Config struct {
	// Conns are the connections to the server; worker i uses
	// Conns[i % len(Conns)].
	Conns []grpc.ClientConnInterface
	// API is the RPC to send.
	API API
	// Concurrency is the number of workers, each with one request in
	// flight.
	Concurrency int
	// Duration is how long to measure, after the warmup; 0: MaxRequests.
	Duration time.Duration
	// Warmup is how long to send before measuring; 0 means no warmup.
	Warmup time.Duration
	// MaxRequests, when positive, stops the run after that many.
	MaxRequests uint64
	// Keys is the number of distinct keys (check and rls), KeyName(i).
	Keys int
	// Zipf, when positive, is the skew (> 1) of the keys' Zipf
	// distribution; 0 means uniform.
	Zipf float64
	// Limit is the inline limit of every Check request (APICheck); its
	// Burst must be 0 (the burst is Requests).
	Limit algorithms.Limit
	// Descriptors is the number of descriptors of every ShouldRateLimit
	// request; 0 means 1.
	Descriptors int
	// Domain is the ShouldRateLimit domain. Required for APIRLS.
	Domain string
	// Target names the server in reports.
	Target string
	// Progress, when not nil, is called from Run's goroutine every
	// ProgressInterval (0 means 250ms) while the run lasts.
	Progress         func(Progress)
	ProgressInterval time.Duration
	// MeasureHook, when not nil, is called from Run's goroutine with true
	// as the measurement begins (after the warmup) and with false as it
	// ends, next to where Run reads its own CPU time: a caller reads other
	// counters there (a server's CPU, a Redis' INFO) over the measured
	// interval only. It is not called at all when the run ends during the
	// warmup. Run waits for it, so it should be quick.
	MeasureHook func(begin bool)
}

// Validate reports what is wrong with c ("invalid load config: ...").
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("invalid load config: "+format, args...)
	}
	switch {
	case len(c.Conns) == 0:
		return bad("no connections")
	case apiNames[c.API] == "":
		return bad("unknown api %v", c.API)
	case c.Concurrency < 1:
		return bad("concurrency must be at least 1, got %d", c.Concurrency)
	case c.Duration < 0:
		return bad("duration must not be negative, got %v", c.Duration)
	case c.Warmup < 0:
		return bad("warmup must not be negative, got %v", c.Warmup)
	case c.Duration == 0 && c.MaxRequests == 0:
		return bad("a duration or a maximum number of requests is required")
	case c.Zipf != 0 && !(c.Zipf > 1):
		return bad("zipf skew must be greater than 1 (or 0 for uniform keys), got %v", c.Zipf)
	case (c.API == APICheck || c.API == APIRLS) && c.Keys < 1:
		return bad("keys must be at least 1, got %d", c.Keys)
	}
	switch c.API {
	case APICheck:
		if c.Limit.Burst != 0 {
			return bad("the bench limit's burst is its requests; got burst %d", c.Limit.Burst)
		}
		if err := c.Limit.Validate(); err != nil {
			return bad("limit: %v", err)
		}
	case APIRLS:
		if c.Descriptors < 0 {
			return bad("descriptors must be at least 1, got %d", c.Descriptors)
		}
		if c.Domain == "" {
			return bad("domain is required for the rls api")
		}
	}
	return nil
}
