package server_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/limited"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

const trackConfig = `
domain: shop
descriptors:
  - key: remote_address
    rate_limit: {name: per_ip, algorithm: fixed_window, unit: minute, requests_per_unit: 2}
  - key: vip
    rate_limit: {unlimited: true}
policies:
  login: {requests: 1, period: 1m, algorithm: fixed_window}
`

func trackSetup(t testing.TB) (*server.RateLimiter, *server.Envoy, *limited.Tracker, time.Time) {
	cfg, err := rules.Parse("rules.yaml", []byte(trackConfig))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := limited.New(limited.Config{})
	s := server.Settings{Rules: testkit.StaticRules(cfg), Limited: tr, Clock: func() time.Time { return now }}
	return server.NewRateLimiter(st, server.CheckSettings{Settings: s}), server.NewEnvoy(st, server.EnvoySettings{Settings: s}), tr, now
}

func envoyReq(key, value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "shop", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}},
	}}
}

// TestTrackedDecisions: both APIs hand their decisions to the tracker,
// each under its rule, policy or inline class, with the key the caller
// sent; unlimited rules and looks are not counted.
func TestTrackedDecisions(t *testing.T) {
	rl, e, tr, now := trackSetup(t)
	ctx := context.Background()
	for range 5 {
		if _, err := e.ShouldRateLimit(ctx, envoyReq("remote_address", "10.0.0.9")); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ShouldRateLimit(ctx, envoyReq("vip", "v")); err != nil {
			t.Fatal(err)
		}
		if _, err := rl.Check(ctx, &floodgatev1.CheckRequest{Key: "bob", Source: &floodgatev1.CheckRequest_Policy{Policy: "login"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := rl.Check(ctx, &floodgatev1.CheckRequest{Key: "eve", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW,
			Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 3, Period: durationpb.New(time.Minute)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := rl.Peek(ctx, &floodgatev1.PeekRequest{Key: "bob", Source: &floodgatev1.PeekRequest_Policy{Policy: "login"}}); err != nil {
			t.Fatal(err)
		}
	}
	r := tr.Report(now, limited.Query{})
	got := map[string]limited.KeyReport{}
	for _, rr := range r.Rules {
		for _, k := range rr.Keys {
			got[rr.Kind+" "+rr.Domain+"/"+rr.Rule+" "+k.Key] = k
		}
	}
	for name, want := range map[string][2]int64{
		// Allowed decisions count from a key's first denial on.
		"envoy shop/per_ip remote_address=10.0.0.9":   {3, 0},
		"policy /login bob":                           {4, 0},
		"inline /inline 3 per 1m0s, fixed_window eve": {2, 0},
	} {
		k, ok := got[name]
		if !ok {
			t.Errorf("no %q in %v", name, got)
			continue
		}
		if k.Denied.Total != want[0] || k.Allowed.Total != want[1] {
			t.Errorf("%s: denied %d, allowed %d; want %d, %d", name, k.Denied.Total, k.Allowed.Total, want[0], want[1])
		}
	}
	if len(got) != 3 {
		t.Errorf("keys %v, want the three above (unlimited rules are not counted)", got)
	}
}

// TestTrackingAllocatesNothing: a decision allocates as much with the
// tracker on as with it off, denied or allowed.
func TestTrackingAllocatesNothing(t *testing.T) {
	rl, e, _, _ := trackSetup(t)
	cfg, err := rules.Parse("rules.yaml", []byte(trackConfig))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	s := server.Settings{Rules: testkit.StaticRules(cfg), Clock: func() time.Time { return now }, Metrics: observability.NewMetrics(nil)}
	rlOff, eOff := server.NewRateLimiter(st, server.CheckSettings{Settings: s}), server.NewEnvoy(st, server.EnvoySettings{Settings: s})
	ctx := context.Background()
	envoyReqs := make([]*rlsv3.RateLimitRequest, 64)
	checkReqs := make([]*floodgatev1.CheckRequest, 64)
	for i := range envoyReqs {
		envoyReqs[i] = envoyReq("remote_address", "10.0.0."+strconv.Itoa(i))
		checkReqs[i] = &floodgatev1.CheckRequest{Key: "user" + strconv.Itoa(i), Source: &floodgatev1.CheckRequest_Policy{Policy: "login"}}
	}
	measure := func(rl *server.RateLimiter, e *server.Envoy) (envoy, check float64) {
		i := 0
		envoy = allocsPerDecision(func() {
			i++
			if _, err := e.ShouldRateLimit(ctx, envoyReqs[i%len(envoyReqs)]); err != nil {
				t.Fatal(err)
			}
		})
		check = allocsPerDecision(func() {
			i++
			if _, err := rl.Check(ctx, checkReqs[i%len(checkReqs)]); err != nil {
				t.Fatal(err)
			}
		})
		return envoy, check
	}
	offEnvoy, offCheck := measure(rlOff, eOff)
	onEnvoy, onCheck := measure(rl, e)
	// Half an allocation a decision is the margin: the race detector's
	// sync.Pool drops some of what is put back, which moves an average by
	// a fraction, while one allocation more a decision moves it by 1.
	if onEnvoy-offEnvoy > 0.5 || onCheck-offCheck > 0.5 {
		t.Errorf("allocations a decision with the tracker: ShouldRateLimit %.2f, Check %.2f; without: %.2f, %.2f", onEnvoy, onCheck, offEnvoy, offCheck)
	}
}

// BenchmarkTracked is ShouldRateLimit's and Check's handlers on the
// embedded store with the tracker off and on, mostly denied (64 keys over
// a limit of 2 a minute): the cost of tracking, measured in one run.
func BenchmarkTracked(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		rl, e, _, _ := trackSetup(b)
		if !on {
			cfg, _ := rules.Parse("rules.yaml", []byte(trackConfig))
			st := memstore.New(memstore.Config{})
			b.Cleanup(func() { st.Close() })
			s := server.Settings{Rules: testkit.StaticRules(cfg)}
			rl, e = server.NewRateLimiter(st, server.CheckSettings{Settings: s}), server.NewEnvoy(st, server.EnvoySettings{Settings: s})
		}
		ctx := context.Background()
		envoyReqs := make([]*rlsv3.RateLimitRequest, benchKeys)
		checkReqs := make([]*floodgatev1.CheckRequest, benchKeys)
		for i := range envoyReqs {
			envoyReqs[i] = envoyReq("remote_address", "10.0."+strconv.Itoa(i>>8)+"."+strconv.Itoa(i&255))
			checkReqs[i] = &floodgatev1.CheckRequest{Key: "user" + strconv.Itoa(i), Source: &floodgatev1.CheckRequest_Policy{Policy: "login"}}
		}
		b.Run("envoy/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				if _, err := e.ShouldRateLimit(ctx, envoyReqs[(i*7)%benchKeys]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("check/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				if _, err := rl.Check(ctx, checkReqs[(i*7)%benchKeys]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// allocsPerDecision is the mean number of heap allocations of one call of
// f over 2,000 calls after a warm-up of 200, on one P as
// testing.AllocsPerRun measures, but as a fraction rather than truncated.
func allocsPerDecision(f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for range 200 {
		f()
	}
	const n = 2000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / n
}
