// Package floodgatetest runs real, in-process floodgates for the tests and
// examples of client, client/grpclimit and client/httplimit: one that
// decides (embedded store, manual clock), one whose store is down, one
// that never answers, one that requires a token, and a loopback address
// nobody listens on.
package floodgatetest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/localshare"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// T0 is the fixed epoch of the manual clock (testkit's).
var T0 = testkit.T0

// Clock is a clock the test moves by hand, starting at T0.
type Clock = testkit.Clock

// RuleSource gives a floodgate its rules: Static's, or a source the test
// swaps (Switch). nil means none (inline limits only).
type RuleSource interface{ Current() *rules.Set }

// Static is rules that never change.
type Static struct{ Config *rules.Set }

// Current is s's rules.
func (s Static) Current() *rules.Set { return s.Config }

// StaticRules is the YAML rules yaml, failing the test if they do not
// parse.
func StaticRules(t testing.TB, yaml string) Static { return Static{Parse(t, yaml)} }

// Switch is rules the test swaps with Store.
type Switch struct{ cur atomic.Pointer[rules.Set] }

// Store makes cfg the current rules.
func (s *Switch) Store(cfg *rules.Set) { s.cur.Store(cfg) }

// Current is the rules last stored.
func (s *Switch) Current() *rules.Set { return s.cur.Load() }

// Parse parses YAML rules, failing the test on an error.
func Parse(t testing.TB, yaml string) *rules.Set {
	t.Helper()
	cfg, err := rules.Parse("policies.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// settings are a floodgate's settings under r and clock.
func settings(r RuleSource, clock func() time.Time) server.Settings {
	s := server.Settings{Clock: clock}
	if r != nil {
		s.Rules = r
	}
	return s
}

// Serve runs a real floodgate (embedded store, clock stopped at T0) with
// the rules r on a free loopback port and returns its address, for
// examples and benchmarks.
func Serve(r RuleSource, opts ...grpc.ServerOption) (addr string, stop func(), err error) {
	return serveStore(memstore.New(memstore.Config{}), settings(r, func() time.Time { return T0 }), opts...)
}

// serveStore serves st under s, and closes it when stopped.
func serveStore(st store.Store, s server.Settings, opts ...grpc.ServerOption) (addr string, stop func(), err error) {
	srv, _ := server.NewGRPCServer(server.NewRateLimiter(st, server.CheckSettings{Settings: s}), nil, server.GRPCSettings{ServerOptions: opts})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return "", nil, err
	}
	go srv.Serve(lis)
	return lis.Addr().String(), func() { srv.Stop(); st.Close() }, nil
}

// Start is Serve for a test, with a manual clock.
func Start(t testing.TB, r RuleSource, opts ...grpc.ServerOption) (string, *Clock) {
	t.Helper()
	clock := testkit.NewClock(T0)
	addr, stop, err := serveStore(memstore.New(memstore.Config{}), settings(r, clock.Now), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr, clock
}

// StartAuth runs a real floodgate that requires the bearer token.
func StartAuth(t testing.TB, token string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ta, err := auth.NewTokenAuth(t.Context(), file, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ta.Close() })
	// The tokens are checked as serve checks them: by a Gate, when a
	// call's headers arrive.
	addr, _ := Start(t, nil, server.NewGate(server.TransportLimits{Auth: ta}).ServerOptions()...)
	return addr
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

// StartDegraded runs a real floodgate whose store is down, so every
// decision comes from the limit's failure mode, marked degraded.
func StartDegraded(t testing.TB, r RuleSource) string {
	t.Helper()
	s := settings(r, func() time.Time { return T0 })
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, stop, err := serveStore(downStore{}, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr
}

// StartLocalShare runs a real floodgate whose store is down and whose
// limits fail to local shares of replicas replicas: each limit's requests
// (and burst) divided by replicas.
func StartLocalShare(t testing.TB, r RuleSource, replicas int) string {
	t.Helper()
	s := settings(r, func() time.Time { return T0 })
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s.FailureMode = rules.FailureLocal
	s.Local = localshare.New(func() int { return replicas }, memstore.Config{})
	t.Cleanup(s.Local.Discard)
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

// StartHanging serves a floodgate API that never answers.
func StartHanging(t testing.TB) string {
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

// DeadAddr is a loopback address nobody listens on.
func DeadAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// Dial is client.Dial for a test, closed when the test ends.
func Dial(t testing.TB, addr string, opts ...client.DialOption) *client.Client {
	t.Helper()
	// A generous call timeout first (opts may set another): the default
	// 100 ms is a production bound, not one a test under -race on a busy
	// machine can promise.
	opts = append([]client.DialOption{client.WithTimeout(testTimeout)}, opts...)
	c, err := client.Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testTimeout bounds each call of a Dial client unless a test sets its own.
const testTimeout = 10 * time.Second

// LogCounter is a slog.Handler that counts the records logged to it.
type LogCounter struct {
	n    atomic.Int64
	mu   sync.Mutex
	msgs []string
}

// Enabled is true: every record counts.
func (h *LogCounter) Enabled(context.Context, slog.Level) bool { return true }

// Handle counts r and keeps its text.
func (h *LogCounter) Handle(_ context.Context, r slog.Record) error {
	h.n.Add(1)
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	h.mu.Lock()
	h.msgs = append(h.msgs, b.String())
	h.mu.Unlock()
	return nil
}

// WithAttrs is h: attributes are not kept.
func (h *LogCounter) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup is h: groups are not kept.
func (h *LogCounter) WithGroup(string) slog.Handler { return h }

// WantLogged checks that n records were logged, each mentioning want.
func (h *LogCounter) WantLogged(t testing.TB, n int64, want string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if got := h.n.Load(); got != n {
		t.Fatalf("logged %d records %q, want %d", got, h.msgs, n)
	}
	for _, m := range h.msgs {
		if !strings.Contains(m, want) {
			t.Fatalf("log %q does not mention %q", m, want)
		}
	}
}

// ErrorLog collects the errors an OnError hook is told.
type ErrorLog struct {
	mu   sync.Mutex
	errs []error
}

// Add records err.
func (l *ErrorLog) Add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

// Codes are the gRPC codes of the errors recorded, in order.
func (l *ErrorLog) Codes() []codes.Code {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []codes.Code
	for _, e := range l.errs {
		out = append(out, status.Code(e))
	}
	return out
}
