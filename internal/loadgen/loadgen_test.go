package loadgen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/loadgen"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// startServer runs a floodgate server (embedded store) on a loopback port
// and returns connections to it. cfgYAML, when not empty, is its rules.
func startServer(t *testing.T, cfgYAML string, conns int) []grpc.ClientConnInterface {
	t.Helper()
	var src server.RuleSource
	if cfgYAML != "" {
		cfg, err := rules.Parse("bench.yaml", []byte(cfgYAML))
		if err != nil {
			t.Fatal(err)
		}
		src = testkit.StaticRules(cfg)
	}
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	srv, _ := server.NewGRPCServer(
		server.NewRateLimiter(st, server.CheckSettings{Settings: server.Settings{Rules: src}}),
		server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Rules: src}}),
		server.GRPCSettings{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	var out []grpc.ClientConnInterface
	for range conns {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		out = append(out, conn)
	}
	return out
}

func limit(alg algorithms.Algorithm, requests int64, period time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: alg, Requests: requests, Period: period}
}

// checkConsistent asserts what every run must satisfy.
func checkConsistent(t *testing.T, res *loadgen.Result) {
	t.Helper()
	if res.Requests() == 0 || res.RequestRate() <= 0 {
		t.Fatalf("no requests measured: %+v", res)
	}
	if got := res.Allowed + res.Denied + res.ErrorCount(); got != res.Requests() || res.Latency.Count() != res.Requests() {
		t.Fatalf("allowed %d + denied %d + errors %d = %d, latencies %d; requests %d",
			res.Allowed, res.Denied, res.ErrorCount(), got, res.Latency.Count(), res.Requests())
	}
	if res.ErrorCount() != 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	qs := []time.Duration{res.Latency.Min()}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		qs = append(qs, res.Latency.Quantile(q))
	}
	qs = append(qs, res.Latency.Max())
	for i := 1; i < len(qs); i++ {
		if qs[i] < qs[i-1] || qs[i] <= 0 {
			t.Fatalf("latencies min, p50, p90, p99, p99.9, max not ordered: %v", qs)
		}
	}
	if res.Elapsed <= 0 || res.Interrupted {
		t.Fatalf("elapsed %v, interrupted %v", res.Elapsed, res.Interrupted)
	}
}

func TestRunEachAPI(t *testing.T) {
	tiny := limit(algorithms.TokenBucket, 1, time.Hour)
	huge := limit(algorithms.TokenBucket, 1_000_000_000, time.Second)
	cases := []struct {
		name        string
		cfg         loadgen.Config
		serverCfg   string
		wantDenied  bool // most requests denied (else none)
		maxAllowed  uint64
		checkResult func(*testing.T, *loadgen.Result)
	}{
		{name: "health", cfg: loadgen.Config{API: loadgen.APIHealth}},
		{name: "check huge limit", cfg: loadgen.Config{API: loadgen.APICheck, Keys: 100, Limit: huge}},
		{name: "check tiny limit", cfg: loadgen.Config{API: loadgen.APICheck, Keys: 3, Limit: tiny}, wantDenied: true, maxAllowed: 3},
		{name: "check sliding window zipf", cfg: loadgen.Config{API: loadgen.APICheck, Keys: 1000, Zipf: 1.2, Limit: limit(algorithms.SlidingWindow, 1_000_000, time.Minute)}},
		{name: "check fixed window", cfg: loadgen.Config{API: loadgen.APICheck, Keys: 10, Limit: limit(algorithms.FixedWindow, 2, time.Hour)}, wantDenied: true, maxAllowed: 20},
		{name: "check sliding log", cfg: loadgen.Config{API: loadgen.APICheck, Keys: 10, Limit: limit(algorithms.SlidingWindowLog, 2, time.Hour)}, wantDenied: true, maxAllowed: 20},
		{name: "rls huge limit", cfg: loadgen.Config{API: loadgen.APIRLS, Keys: 100, Domain: "bench", Limit: huge}},
		{name: "rls tiny limit 3 descriptors", cfg: loadgen.Config{API: loadgen.APIRLS, Keys: 5, Descriptors: 3, Domain: "bench", Limit: tiny}, wantDenied: true, maxAllowed: 5},
	}
	for _, tc := range cases {
		// One after another: each run measures a fixed 300 ms, which
		// eight runs side by side on a busy machine could starve.
		t.Run(tc.name, func(t *testing.T) {
			cfgYAML := ""
			if tc.cfg.API == loadgen.APIRLS {
				cfgYAML = loadgen.RLSConfig(tc.cfg.Domain, max(tc.cfg.Descriptors, 1), tc.cfg.Limit)
				tc.cfg.Limit = algorithms.Limit{}
			}
			cfg := tc.cfg
			cfg.Conns = startServer(t, cfgYAML, 2)
			cfg.Concurrency = 8
			cfg.Duration = 300 * time.Millisecond
			cfg.Warmup = 50 * time.Millisecond
			res, err := loadgen.Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkConsistent(t, res)
			if tc.wantDenied {
				if res.Allowed > tc.maxAllowed || res.Denied <= res.Allowed {
					t.Fatalf("allowed %d, denied %d; want at most %d allowed and most denied", res.Allowed, res.Denied, tc.maxAllowed)
				}
			} else if res.Denied != 0 {
				t.Fatalf("allowed %d, denied %d; want none denied", res.Allowed, res.Denied)
			}
			rep := res.Report()
			if rep.API != cfg.API.String() || rep.Conns != 2 || rep.Concurrency != 8 || rep.Requests != res.Requests() {
				t.Fatalf("report settings: %+v", rep)
			}
			var sum uint64
			for _, b := range rep.Histogram {
				sum += b.Count
			}
			if sum != res.Requests() {
				t.Fatalf("histogram bins hold %d requests, want %d", sum, res.Requests())
			}
		})
	}
}

func TestRLSWithoutConfigIsAllAllowed(t *testing.T) {
	// The reason RLSConfig exists: a server without the rules answers OK.
	res, err := loadgen.Run(t.Context(), loadgen.Config{
		Conns: startServer(t, "", 1), API: loadgen.APIRLS, Domain: "bench", Keys: 1,
		Concurrency: 2, MaxRequests: 50,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed != 50 || res.Denied != 0 {
		t.Fatalf("allowed %d, denied %d, want 50, 0", res.Allowed, res.Denied)
	}
}

func TestMaxRequestsIsExact(t *testing.T) {
	res, err := loadgen.Run(t.Context(), loadgen.Config{
		Conns: startServer(t, "", 1), API: loadgen.APICheck, Keys: 1,
		Limit:       limit(algorithms.FixedWindow, 100, time.Hour),
		Concurrency: 7, MaxRequests: 250, Warmup: 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, res)
	// One key, 100 per hour, no warmup: exactly 100 admitted out of 250.
	if res.Requests() != 250 || res.Allowed != 100 || res.Denied != 150 {
		t.Fatalf("requests %d allowed %d denied %d, want 250, 100, 150", res.Requests(), res.Allowed, res.Denied)
	}
}

func TestErrorsAreCountedByCode(t *testing.T) {
	// A server with only the health service answers Check with Unimplemented.
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := loadgen.Run(t.Context(), loadgen.Config{
		Conns: []grpc.ClientConnInterface{conn}, API: loadgen.APICheck, Keys: 1,
		Limit: limit(algorithms.TokenBucket, 1, time.Second), Concurrency: 2, MaxRequests: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests() != 20 || res.ErrorCount() != 20 || res.Errors[codes.Unimplemented] != 20 || res.Latency.Count() != 20 {
		t.Fatalf("requests %d, errors %v, latencies %d; want 20 Unimplemented", res.Requests(), res.Errors, res.Latency.Count())
	}
	if got := res.Report().ErrorsByCode; !reflect.DeepEqual(got, map[string]uint64{"Unimplemented": 20}) {
		t.Fatalf("errors_by_code = %v", got)
	}
}

// TestCancelStopsTheRun cancels a run once its progress shows measured
// requests: Run returns promptly with an interrupted result holding them.
// On the slow server every call outlives the 20ms warmup, so the first
// answers after it began were sent during the warmup, which the Result
// discards; progress must not show them as measured (it did, and the run
// was cancelled with 0 requests, as happened at random on a loaded machine).
func TestCancelStopsTheRun(t *testing.T) {
	servers := []struct {
		name  string
		conns func(t *testing.T) []grpc.ClientConnInterface
	}{
		{"floodgate", func(t *testing.T) []grpc.ClientConnInterface { return startServer(t, "", 1) }},
		{"slow health server", func(t *testing.T) []grpc.ClientConnInterface {
			return []grpc.ClientConnInterface{slowHealthServer(t, 100*time.Millisecond)}
		}},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			progress := make(chan loadgen.Progress, 100)
			go func() {
				// Cancel once measuring has visibly started.
				for p := range progress {
					if !p.Warmup && p.Requests > 0 {
						cancel()
						return
					}
				}
			}()
			done := make(chan struct{})
			var res *loadgen.Result
			var err error
			conns := srv.conns(t)
			go func() {
				defer close(done)
				res, err = loadgen.Run(ctx, loadgen.Config{
					Conns: conns, API: loadgen.APIHealth, Concurrency: 4,
					Duration: time.Hour, Warmup: 20 * time.Millisecond, ProgressInterval: 10 * time.Millisecond,
					Progress: func(p loadgen.Progress) {
						select {
						case progress <- p:
						default:
						}
					},
				})
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return after its context was cancelled")
			}
			close(progress)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Interrupted || res.Requests() == 0 || res.ErrorCount() != 0 {
				t.Fatalf("interrupted %v, requests %d, errors %v; want an interrupted run with requests and no errors", res.Interrupted, res.Requests(), res.Errors)
			}
		})
	}
}

// slowHealthServer serves grpc.health.v1 on a loopback port, answering
// each call after delay.
func slowHealthServer(t *testing.T, delay time.Duration) grpc.ClientConnInterface {
	t.Helper()
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		time.Sleep(delay)
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestValidate(t *testing.T) {
	conns := []grpc.ClientConnInterface{nil}
	ok := limit(algorithms.TokenBucket, 10, time.Second)
	cases := []struct {
		name string
		cfg  loadgen.Config
		want string
	}{
		{"no conns", loadgen.Config{API: loadgen.APIHealth, Concurrency: 1, Duration: time.Second}, "no connections"},
		{"no api", loadgen.Config{Conns: conns, Concurrency: 1, Duration: time.Second}, "unknown api"},
		{"concurrency 0", loadgen.Config{Conns: conns, API: loadgen.APIHealth, Duration: time.Second}, "concurrency must be at least 1, got 0"},
		{"no stop", loadgen.Config{Conns: conns, API: loadgen.APIHealth, Concurrency: 1}, "a duration or a maximum"},
		{"negative warmup", loadgen.Config{Conns: conns, API: loadgen.APIHealth, Concurrency: 1, Duration: time.Second, Warmup: -1}, "warmup must not be negative"},
		{"zipf 1", loadgen.Config{Conns: conns, API: loadgen.APICheck, Concurrency: 1, Duration: time.Second, Keys: 1, Zipf: 1, Limit: ok}, "zipf skew must be greater than 1"},
		{"no keys", loadgen.Config{Conns: conns, API: loadgen.APICheck, Concurrency: 1, Duration: time.Second, Limit: ok}, "keys must be at least 1"},
		{"no limit", loadgen.Config{Conns: conns, API: loadgen.APICheck, Concurrency: 1, Duration: time.Second, Keys: 1}, "limit:"},
		{"burst", loadgen.Config{Conns: conns, API: loadgen.APICheck, Concurrency: 1, Duration: time.Second, Keys: 1, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Period: time.Second, Burst: 5}}, "burst"},
		{"no domain", loadgen.Config{Conns: conns, API: loadgen.APIRLS, Concurrency: 1, Duration: time.Second, Keys: 1}, "domain is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), "invalid load config: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an invalid load config containing %q", err, tc.want)
			}
			if _, err := loadgen.Run(t.Context(), tc.cfg); err == nil {
				t.Fatal("Run accepted an invalid config")
			}
		})
	}
	valid := loadgen.Config{Conns: conns, API: loadgen.APICheck, Concurrency: 1, Duration: time.Second, Keys: 1, Limit: ok}
	if err := valid.Validate(); err != nil {
		t.Fatalf("Validate() of a valid config = %v", err)
	}
}

func TestFormatLimit(t *testing.T) {
	for _, tc := range []struct {
		requests int64
		period   time.Duration
		want     string
	}{
		{100, time.Second, "100/1s"},
		{10, time.Minute, "10/1m"},
		{7, time.Hour, "7/1h"},
		{3, 1500 * time.Millisecond, "3/1500ms"},
		{1, 90 * time.Second, "1/90s"},
	} {
		if got := loadgen.FormatLimit(tc.requests, tc.period); got != tc.want {
			t.Errorf("FormatLimit(%d, %v) = %q, want %q", tc.requests, tc.period, got, tc.want)
		}
	}
}

func TestParseAPI(t *testing.T) {
	for _, a := range []loadgen.API{loadgen.APICheck, loadgen.APIRLS, loadgen.APIHealth} {
		if got, err := loadgen.ParseAPI(a.String()); err != nil || got != a {
			t.Errorf("ParseAPI(%q) = %v, %v", a.String(), got, err)
		}
	}
	if _, err := loadgen.ParseAPI("grpc"); err == nil || !strings.Contains(err.Error(), "want check, rls, health or rlqs") {
		t.Errorf("ParseAPI(grpc) = %v", err)
	}
}

func TestRLSConfigParses(t *testing.T) {
	for _, alg := range algorithms.All() {
		y := loadgen.RLSConfig("bench", 3, limit(alg, 10, time.Minute))
		cfg, err := rules.Parse("bench.yaml", []byte(y))
		if err != nil {
			t.Fatalf("%v: %v\n%s", alg, err, y)
		}
		for j := range 3 {
			entries := []rules.Entry{{Key: loadgen.DescriptorKey(j), Value: loadgen.KeyName(42)}}
			ls := cfg.Match("bench", entries)
			if len(ls) != 1 || ls[0].Rate.Algorithm != alg || ls[0].Rate.Requests != 10 || ls[0].Rate.Period != time.Minute || ls[0].Rate.Capacity() != 10 {
				t.Fatalf("%v: descriptor %d matched %+v, want one %v limit of 10/1m", alg, j, ls, alg)
			}
		}
	}
}

func TestReportJSONAndText(t *testing.T) {
	res, err := loadgen.Run(t.Context(), loadgen.Config{
		Conns: startServer(t, "", 1), API: loadgen.APICheck, Keys: 10, Target: "loopback",
		Limit: limit(algorithms.TokenBucket, 5, time.Hour), Concurrency: 3, MaxRequests: 200,
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	// Every documented field is present, and nothing else.
	var raw map[string]any
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	want := []string{"api", "target", "concurrency", "conns", "keys", "algorithm", "limit",
		"warmup_seconds", "elapsed_seconds", "requests", "allowed", "denied", "errors", "errors_by_code",
		"requests_per_second", "decisions_per_second", "latency_us", "histogram", "interrupted", "generator_cpu"}
	for _, k := range want {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if len(raw) != len(want) {
		t.Errorf("JSON has %d fields, want %d: %v", len(raw), len(want), raw)
	}
	var rep loadgen.Report
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep, res.Report()) {
		t.Errorf("JSON round trip differs:\n%+v\n%+v", rep, res.Report())
	}
	if rep.Requests != 200 || rep.Allowed != 50 || rep.Denied != 150 || rep.Limit != "5/1h" || rep.Algorithm != "token_bucket" {
		t.Errorf("report: %+v", rep)
	}

	buf.Reset()
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if unix := runtime.GOOS != "windows" && runtime.GOOS != "plan9" && runtime.GOOS != "js" && runtime.GOOS != "wasip1"; unix && (res.GeneratorCPU <= 0 || rep.GeneratorCPU.UsPerRequest <= 0 || rep.GeneratorCPU.Cores <= 0) {
		t.Errorf("generator CPU not measured: %v, %+v", res.GeneratorCPU, rep.GeneratorCPU)
	}
	for _, s := range []string{"api=check target=loopback", "keys=10 (uniform)", "limit=5/1h token_bucket", "allowed", "p99.9", "latency histogram", "#", "CPU per request"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, buf.String())
		}
	}
}
