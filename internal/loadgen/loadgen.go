package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/algorithms"
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

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("invalid load config")

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
// MaxRequests are required; the zero value of every other field means what
// its comment says.
type Config struct {
	// Conns are the connections to the server, all to the same one. Worker
	// i uses Conns[i % len(Conns)]. Required.
	Conns []grpc.ClientConnInterface
	// API is the RPC to send. Required.
	API API
	// Concurrency is the number of workers, each with one request in
	// flight at a time (a closed loop). Must be at least 1.
	Concurrency int
	// Duration is how long to measure, after the warmup. 0 means until
	// MaxRequests requests were measured (one of the two is required).
	Duration time.Duration
	// Warmup is how long to send before measuring; 0 means no warmup.
	Warmup time.Duration
	// MaxRequests, when positive, stops the run after that many measured
	// requests.
	MaxRequests uint64
	// Keys is the number of distinct keys (check and rls). Must be at least
	// 1. Keys are named KeyName(0), ..., KeyName(Keys-1).
	Keys int
	// Zipf, when positive, draws keys from a Zipf distribution with this
	// skew (must be > 1): key 0 is the most frequent. 0 means uniform.
	Zipf float64
	// Limit is the inline limit of every Check request (algorithm,
	// requests, period; the burst of a token bucket is Requests). Required
	// for APICheck; its Burst must be 0.
	Limit algorithms.Limit
	// Descriptors is the number of descriptors of every ShouldRateLimit
	// request, each with one entry (DescriptorKey(j), KeyName(key)). 0 means 1.
	Descriptors int
	// Domain is the ShouldRateLimit domain. Required for APIRLS.
	Domain string
	// Target names the server in reports, e.g. its address. Informational.
	Target string
	// Seed seeds the key choice; 0 means a seed from the clock.
	Seed uint64
	// Progress, when not nil, is called from Run's goroutine every
	// ProgressInterval (0 means 250ms) while the run lasts.
	Progress         func(Progress)
	ProgressInterval time.Duration
	// GracePeriod is how long in-flight requests may take after the run
	// ended before they are cancelled. 0 means 5s.
	GracePeriod time.Duration
	// MeasureHook, when not nil, is called from Run's goroutine with true
	// as the measurement begins (after the warmup) and with false as it
	// ends, next to where Run reads its own CPU time: a caller reads other
	// counters there (a server's CPU, a Redis' INFO) over the measured
	// interval only. It is not called at all when the run ends during the
	// warmup. Run waits for it, so it should be quick.
	MeasureHook func(begin bool)
}

// Validate reports what is wrong with c. The error wraps ErrInvalidConfig.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
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
	}
	switch c.API {
	case APICheck, APIRLS:
		if c.Keys < 1 {
			return bad("keys must be at least 1, got %d", c.Keys)
		}
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

// Progress is a snapshot of a run in progress.
type Progress struct {
	// Warmup is true while warming up (nothing is measured yet).
	Warmup bool
	// Elapsed is the time since the current phase (warmup or measurement)
	// began.
	Elapsed time.Duration
	// Requests is the number of requests answered in the current phase:
	// while measuring, only those the Result will count (sent and answered
	// while measuring), so a Progress with Requests > 0 and Warmup false
	// means the Result has requests.
	Requests uint64
	// Rate is Requests / Elapsed, per second.
	Rate float64
}

// Result is what a run measured. Only requests both sent and answered
// during the measurement count; requests in flight when it began or ended
// are discarded (at most Concurrency of each).
type Result struct {
	// Config is the configuration of the run, defaults filled in (with
	// Progress cleared).
	Config Config
	// Elapsed is the measured time.
	Elapsed time.Duration
	// Allowed and Denied count the decisions: for check, CheckResponse.allowed;
	// for rls, overall_code OK (Allowed) or any other code (Denied, normally
	// OVER_LIMIT); for health, SERVING (Allowed) or any other serving status
	// (Denied).
	Allowed, Denied uint64
	// Errors counts the failed RPCs by gRPC status code.
	Errors map[codes.Code]uint64
	// Latency holds the latency of every measured request, errors included.
	Latency *Histogram
	// Interrupted is set when the run's context ended before the run did.
	Interrupted bool
	// GeneratorCPU is the CPU time (user + system) the whole process used
	// during the measurement: the generator's own cost, to compare with the
	// server's (when the server runs in the same process, both). 0 where
	// the platform does not say (only Unix does).
	GeneratorCPU time.Duration
}

// GeneratorCPUPerRequest is GeneratorCPU divided by Requests.
func (r *Result) GeneratorCPUPerRequest() time.Duration {
	if n := r.Requests(); n > 0 {
		return r.GeneratorCPU / time.Duration(n)
	}
	return 0
}

// ErrorCount is the number of failed requests.
func (r *Result) ErrorCount() uint64 {
	var n uint64
	for _, c := range r.Errors {
		n += c
	}
	return n
}

// Requests is the number of measured requests: Allowed + Denied + ErrorCount.
func (r *Result) Requests() uint64 { return r.Allowed + r.Denied + r.ErrorCount() }

// RequestRate is Requests per second of Elapsed.
func (r *Result) RequestRate() float64 { return perSecond(r.Requests(), r.Elapsed) }

// DecisionRate is Allowed + Denied per second of Elapsed: the answered
// requests, errors excluded.
func (r *Result) DecisionRate() float64 { return perSecond(r.Allowed+r.Denied, r.Elapsed) }

func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Run phases, in order.
const (
	phaseWarmup int32 = iota
	// phaseStarting is the switch from warmup to measuring, while the
	// MeasureHook runs: workers send nothing new, so that what the server
	// answers between the hook and the measurement's start is at most the
	// calls in flight.
	phaseStarting
	phaseMeasure
	phaseStopped
)

// numCodes is the number of gRPC codes (OK through Unauthenticated); other
// codes are counted as Unknown.
const numCodes = int(codes.Unauthenticated) + 1

// worker is one closed-loop sender's counters. Only its goroutine writes
// them until Run has waited for it, except done and measured, which
// progress reads.
type worker struct {
	hist     Histogram
	allowed  uint64
	denied   uint64
	errs     [numCodes]uint64
	done     atomic.Uint64 // answered requests, in any phase
	measured atomic.Uint64 // answered requests recorded, after recording
	_        [64]byte      // keep the counters off the next worker's cache line
}

// caller sends one request for key and says whether it was allowed.
type caller func(ctx context.Context, key int) (allowed bool, err error)

// Run sends requests as Config says until the duration or MaxRequests is
// reached, or ctx ends (then the result so far is returned, Interrupted).
// Metadata in ctx (e.g. an authorization token) is sent with every request.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Descriptors == 0 {
		cfg.Descriptors = 1
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 250 * time.Millisecond
	}
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = 5 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	newCaller := builder(&cfg)

	// Calls outlive ctx by the grace period, so that a cancelled run stops
	// measuring before its in-flight calls fail.
	callCtx, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCalls()

	hook := func(begin bool) {
		if cfg.MeasureHook != nil {
			cfg.MeasureHook(begin)
		}
	}
	var phase atomic.Int32
	if cfg.Warmup == 0 {
		hook(true) // before any worker sends
		phase.Store(phaseMeasure)
	}
	var budget *atomic.Int64
	if cfg.MaxRequests > 0 {
		budget = new(atomic.Int64)
		budget.Store(int64(min(cfg.MaxRequests, 1<<62)))
	}

	begun := make(chan struct{}) // closed when phaseStarting ends
	workers := make([]worker, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range workers {
		w := &workers[i]
		call := newCaller(cfg.Conns[i%len(cfg.Conns)])
		pick := keyPicker(cfg, uint64(i))
		wg.Go(func() { w.run(callCtx, call, pick, &phase, budget, begun) })
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()

	res := &Result{Config: cfg}
	res.Config.Progress = nil
	res.Config.MeasureHook = nil
	start := time.Now()
	phaseStart := start
	// answered counts the requests answered in the current phase: while
	// warming up, all of them; while measuring, those recorded, so that
	// calls sent during the warmup and answered after it, which the Result
	// discards, do not show as measured.
	answered := func(measuring bool) uint64 {
		var n uint64
		for i := range workers {
			if measuring {
				n += workers[i].measured.Load()
			} else {
				n += workers[i].done.Load()
			}
		}
		return n
	}
	var cpuStart time.Duration
	beginMeasure := func() {
		phase.Store(phaseStarting)
		hook(true)
		cpuStart, _ = processCPU()
		phaseStart = time.Now()
		phase.Store(phaseMeasure)
		close(begun)
	}
	var measureStart, measureEnd time.Time
	if cfg.Warmup == 0 {
		measureStart = start
		cpuStart, _ = processCPU()
	}
	var cpuEnd time.Duration
	running := true
	stop := func() {
		measureEnd = time.Now()
		phase.Store(phaseStopped)
		cpuEnd, _ = processCPU()
		if !measureStart.IsZero() {
			hook(false)
		}
		running = false
	}

	ticker := time.NewTicker(cfg.ProgressInterval)
	defer ticker.Stop()
	warmupTimer := time.NewTimer(cfg.Warmup)
	defer warmupTimer.Stop()
	var endTimer <-chan time.Time // armed when measurement begins
	if cfg.Warmup == 0 && cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		endTimer = t.C
	}
	for running {
		select {
		case <-warmupTimer.C:
			if phase.Load() == phaseWarmup {
				beginMeasure()
				measureStart = phaseStart
				if cfg.Duration > 0 {
					t := time.NewTimer(cfg.Duration)
					defer t.Stop()
					endTimer = t.C
				}
			}
		case <-endTimer:
			stop()
		case <-allDone: // MaxRequests reached
			stop()
		case <-ctx.Done():
			stop()
			res.Interrupted = true
		case now := <-ticker.C:
			if cfg.Progress != nil {
				warm := phase.Load() == phaseWarmup
				n := answered(!warm)
				el := now.Sub(phaseStart)
				cfg.Progress(Progress{Warmup: warm, Elapsed: el, Requests: n, Rate: perSecond(n, el)})
			}
		}
	}
	if res.Interrupted {
		cancelCalls()
	}
	grace := time.NewTimer(cfg.GracePeriod)
	select {
	case <-allDone:
		grace.Stop()
	case <-grace.C:
		cancelCalls()
		<-allDone
	}

	if !measureStart.IsZero() {
		res.Elapsed = measureEnd.Sub(measureStart)
		res.GeneratorCPU = max(cpuEnd-cpuStart, 0)
	}
	res.Latency = new(Histogram)
	res.Errors = map[codes.Code]uint64{}
	for i := range workers {
		w := &workers[i]
		res.Latency.Merge(&w.hist)
		res.Allowed += w.allowed
		res.Denied += w.denied
		for c, n := range w.errs {
			if n > 0 {
				res.Errors[codes.Code(c)] += n
			}
		}
	}
	return res, nil
}

// run is one worker's closed loop: send, wait for the answer, record it if
// the whole exchange happened while measuring, repeat.
func (w *worker) run(ctx context.Context, call caller, pick func() int, phase *atomic.Int32, budget *atomic.Int64, begun <-chan struct{}) {
	for {
		p := phase.Load()
		if p == phaseStopped {
			return
		}
		if p == phaseStarting {
			<-begun
			continue
		}
		if p == phaseMeasure && budget != nil && budget.Add(-1) < 0 {
			return
		}
		key := pick()
		t := time.Now()
		allowed, err := call(ctx, key)
		d := time.Since(t)
		w.done.Add(1)
		if p != phaseMeasure || phase.Load() != phaseMeasure {
			continue
		}
		w.hist.Record(d)
		switch {
		case err != nil:
			c := int(status.Code(err))
			if c >= numCodes {
				c = int(codes.Unknown)
			}
			w.errs[c]++
		case allowed:
			w.allowed++
		default:
			w.denied++
		}
		w.measured.Add(1)
	}
}

// keyPicker returns a worker's key chooser, seeded per worker.
func keyPicker(cfg Config, worker uint64) func() int {
	r := rand.New(rand.NewPCG(cfg.Seed, worker))
	n := max(cfg.Keys, 1)
	if cfg.Zipf > 1 && n > 1 {
		z := rand.NewZipf(r, cfg.Zipf, 1, uint64(n-1))
		return func() int { return int(z.Uint64()) }
	}
	return func() int { return r.IntN(n) }
}

// builder pre-builds every request of the run and returns a function that
// makes a worker's caller on one connection. Each caller reuses its own
// reply message; requests are shared read-only between workers.
func builder(cfg *Config) func(grpc.ClientConnInterface) caller {
	switch cfg.API {
	case APICheck:
		limit := &floodgatev1.Limit{Requests: cfg.Limit.Requests, Period: durationpb.New(cfg.Limit.Period)}
		reqs := make([]rawRequest, cfg.Keys)
		for i := range reqs {
			reqs[i] = marshalRequest(&floodgatev1.CheckRequest{
				Key:       KeyName(i),
				Algorithm: floodgatev1.Algorithm(cfg.Limit.Algorithm),
				Cost:      1,
				Source:    &floodgatev1.CheckRequest_Limit{Limit: limit},
			})
		}
		return func(conn grpc.ClientConnInterface) caller {
			reply := new(verdict) // CheckResponse.allowed
			return func(ctx context.Context, key int) (bool, error) {
				if err := conn.Invoke(ctx, floodgatev1.RateLimiter_Check_FullMethodName, reqs[key], reply, callCodec); err != nil {
					return false, err
				}
				return *reply == 1, nil
			}
		}
	case APIRLS:
		reqs := make([]rawRequest, cfg.Keys)
		for i := range reqs {
			ds := make([]*ratelimitv3.RateLimitDescriptor, cfg.Descriptors)
			for j := range ds {
				ds[j] = &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: DescriptorKey(j), Value: KeyName(i)}}}
			}
			reqs[i] = marshalRequest(&rlsv3.RateLimitRequest{Domain: cfg.Domain, Descriptors: ds, HitsAddend: 1})
		}
		return func(conn grpc.ClientConnInterface) caller {
			reply := new(verdict) // RateLimitResponse.overall_code
			return func(ctx context.Context, key int) (bool, error) {
				if err := conn.Invoke(ctx, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, reqs[key], reply, callCodec); err != nil {
					return false, err
				}
				return *reply == verdict(rlsv3.RateLimitResponse_OK), nil
			}
		}
	default: // APIHealth
		req := marshalRequest(&healthpb.HealthCheckRequest{})
		return func(conn grpc.ClientConnInterface) caller {
			reply := new(verdict) // HealthCheckResponse.status
			return func(ctx context.Context, _ int) (bool, error) {
				if err := conn.Invoke(ctx, healthpb.Health_Check_FullMethodName, req, reply, callCodec); err != nil {
					return false, err
				}
				return *reply == verdict(healthpb.HealthCheckResponse_SERVING), nil
			}
		}
	}
}
