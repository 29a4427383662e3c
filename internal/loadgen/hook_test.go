package loadgen_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate/internal/loadgen"
)

// countingHealthServer serves grpc.health.v1 on a loopback port and counts
// the calls it has answered.
func countingHealthServer(t *testing.T) (grpc.ClientConnInterface, *atomic.Int64) {
	t.Helper()
	var served atomic.Int64
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		served.Add(1)
		return resp, err
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
	return conn, &served
}

// The hook brackets exactly the measured interval: every measured request
// was served between its two calls, and at most the requests in flight at
// either edge (Concurrency each) were served between them unmeasured.
func TestMeasureHookBracketsTheMeasurement(t *testing.T) {
	const workers = 4
	cases := []struct {
		name      string
		warmup    time.Duration
		maxReqs   uint64
		wantWarm  bool // requests served before the hook's begin
		wantCalls []bool
		hookTakes time.Duration // how long the hook's begin takes
	}{
		{name: "with warmup", warmup: 150 * time.Millisecond, wantWarm: true, wantCalls: []bool{true, false}},
		// A slow hook (or Run's goroutine preempted after it, as on a
		// loaded machine) must not let warmup calls be served unmeasured
		// between the hook and the measurement's start.
		{name: "with warmup, slow hook", warmup: 150 * time.Millisecond, wantWarm: true, wantCalls: []bool{true, false}, hookTakes: 50 * time.Millisecond},
		{name: "without warmup", wantCalls: []bool{true, false}},
		{name: "max requests", maxReqs: 500, wantCalls: []bool{true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, served := countingHealthServer(t)
			var calls []bool
			var atBegin, atEnd int64
			cfg := loadgen.Config{
				Conns: []grpc.ClientConnInterface{conn}, API: loadgen.APIHealth, Concurrency: workers,
				Warmup: tc.warmup, MaxRequests: tc.maxReqs,
				MeasureHook: func(begin bool) {
					calls = append(calls, begin)
					if begin {
						atBegin = served.Load()
						time.Sleep(tc.hookTakes)
					} else {
						atEnd = served.Load()
					}
				},
			}
			if tc.maxReqs == 0 {
				cfg.Duration = 300 * time.Millisecond
			}
			res, err := loadgen.Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(calls) != len(tc.wantCalls) || calls[0] != tc.wantCalls[0] || calls[1] != tc.wantCalls[1] {
				t.Fatalf("hook calls %v, want %v", calls, tc.wantCalls)
			}
			if (atBegin > 0) != tc.wantWarm {
				t.Fatalf("%d requests served before the measurement began; want some: %v", atBegin, tc.wantWarm)
			}
			between := uint64(atEnd - atBegin)
			if n := res.Requests(); n == 0 || n > between || between > n+2*workers {
				t.Fatalf("%d requests measured, %d served between the hook's calls; want measured ≤ served ≤ measured + %d", n, between, 2*workers)
			}
			if res.Config.MeasureHook != nil {
				t.Fatal("Result.Config keeps the hook")
			}
		})
	}
}

// A run that ends during its warmup measured nothing, and says so to the
// hook by never calling it.
func TestMeasureHookNotCalledWhenWarmupIsCut(t *testing.T) {
	conn, _ := countingHealthServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	var calls int
	res, err := loadgen.Run(ctx, loadgen.Config{
		Conns: []grpc.ClientConnInterface{conn}, API: loadgen.APIHealth, Concurrency: 2,
		Warmup: time.Hour, Duration: time.Second,
		MeasureHook: func(bool) { calls++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 0 || res.Requests() != 0 || !res.Interrupted {
		t.Fatalf("hook called %d times, %d requests, interrupted %v; want 0, 0, true", calls, res.Requests(), res.Interrupted)
	}
}
