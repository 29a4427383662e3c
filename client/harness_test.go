package client_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/algorithms"
	"github.com/floodgate/floodgate/internal/api"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/server"
	"github.com/floodgate/floodgate/internal/store"
	"github.com/floodgate/floodgate/internal/store/memstore"
)

// t0 is the fixed epoch of the tests' manual clock.
var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// manualClock is a clock the test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// staticConfig is a ConfigSource that never changes.
type staticConfig struct{ cfg *rules.Config }

func (s staticConfig) Current() *rules.Config { return s.cfg }

// serveFloodgate runs a real floodgate (embedded store, clock stopped at
// t0 unless s sets one) on a free loopback port and returns its address.
func serveFloodgate(s api.Settings, opts ...grpc.ServerOption) (addr string, stop func(), err error) {
	return serveStore(memstore.New(memstore.Config{}), s, opts...)
}

// serveStore is serveFloodgate with the store st, which it closes.
func serveStore(st store.Store, s api.Settings, opts ...grpc.ServerOption) (addr string, stop func(), err error) {
	if s.Clock == nil {
		s.Clock = func() time.Time { return t0 }
	}
	srv, _ := server.NewGRPCServer(api.NewRateLimiter(st, s), nil, server.GRPCSettings{ServerOptions: opts})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return "", nil, err
	}
	go srv.Serve(lis)
	return lis.Addr().String(), func() { srv.Stop(); st.Close() }, nil
}

// startFloodgate is serveFloodgate for a test, with a manual clock.
func startFloodgate(t *testing.T, s api.Settings, opts ...grpc.ServerOption) (string, *manualClock) {
	t.Helper()
	clock := &manualClock{now: t0}
	if s.Clock == nil {
		s.Clock = clock.Now
	}
	addr, stop, err := serveFloodgate(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr, clock
}

// downStore is a store whose backend is always down.
type downStore struct{}

func (downStore) Decide(context.Context, time.Time, []store.Request, []algorithms.Decision) error {
	return store.ErrUnavailable
}
func (downStore) Reset(context.Context, algorithms.Algorithm, string, ...string) error {
	return store.ErrUnavailable
}
func (downStore) Ping(context.Context) error { return store.ErrUnavailable }
func (downStore) Close() error               { return nil }

// startDegraded runs a real floodgate whose store is down, so every
// decision comes from the limit's failure mode, marked degraded.
func startDegraded(t *testing.T, s api.Settings) string {
	t.Helper()
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, stop, err := serveStore(downStore{}, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr
}

// hangingLimiter never answers: each call waits until its caller gives up.
type hangingLimiter struct {
	floodgatev1.UnimplementedRateLimiterServer
}

func (hangingLimiter) Check(ctx context.Context, _ *floodgatev1.CheckRequest) (*floodgatev1.CheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hangingLimiter) CheckBatch(ctx context.Context, _ *floodgatev1.CheckBatchRequest) (*floodgatev1.CheckBatchResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// startHanging serves a floodgate API that never answers.
func startHanging(t *testing.T) string {
	t.Helper()
	srv := grpc.NewServer()
	floodgatev1.RegisterRateLimiterServer(srv, hangingLimiter{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// deadAddr is a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func mustParseConfig(t *testing.T, yaml string) api.ConfigSource {
	t.Helper()
	cfg, err := rules.Parse("policies.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return staticConfig{cfg}
}
