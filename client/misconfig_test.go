package client_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/internal/api"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/rules"
)

// startAuthFloodgate runs a real floodgate that requires the bearer token.
func startAuthFloodgate(t *testing.T, token string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := auth.NewTokenAuth(t.Context(), file, auth.WithAuthLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { auth.Close() })
	addr, _ := startFloodgate(t, api.Settings{}, grpc.ChainUnaryInterceptor(auth.UnaryInterceptor()))
	return addr
}

// rawConn is a plain gRPC connection to addr.
func rawConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// recordCounter is a slog.Handler that counts the records logged to it.
type recordCounter struct {
	n    atomic.Int64
	mu   sync.Mutex
	msgs []string
}

func (h *recordCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordCounter) Handle(_ context.Context, r slog.Record) error {
	h.n.Add(1)
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	h.mu.Lock()
	h.msgs = append(h.msgs, b.String())
	h.mu.Unlock()
	return nil
}
func (h *recordCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordCounter) WithGroup(string) slog.Handler      { return h }

// wantLogged checks that n records were logged, each mentioning want.
func (h *recordCounter) wantLogged(t *testing.T, n int64, want string) {
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

// TestNewWithToken (issue 16, item 2): New on an existing connection sends
// WithToken's token.
func TestNewWithToken(t *testing.T) {
	addr := startAuthFloodgate(t, "s3cret")
	c, err := client.New(rawConn(t, addr), client.WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.Check(context.Background(), "k", perMinute3); err != nil || !d.Allowed {
		t.Fatalf("got %+v, %v, want allowed", d, err)
	}
	if _, err := c.CheckBatch(context.Background(), client.Request{Key: "k", Limit: perMinute3}); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if _, err := c.Peek(context.Background(), "k", perMinute3); err != nil {
		t.Fatalf("peek: %v", err)
	}

	// Over plaintext to a name that is not loopback, gRPC refuses to send
	// the token in the clear.
	_, port, _ := net.SplitHostPort(addr)
	remote, err := grpc.NewClient("passthrough:///floodgate.test:"+port,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remote.Close() })
	c, err = client.New(remote, client.WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(context.Background(), "k", perMinute3); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "insecure") {
		t.Fatalf("token over plaintext to a non-loopback target: got %v, want Unauthenticated (insecure connection)", err)
	}
}

// TestNewRefusesDialOptions (issue 16, item 2): options New cannot apply,
// and an empty token, are errors rather than silently dropped.
func TestNewRefusesDialOptions(t *testing.T) {
	conn := rawConn(t, deadAddr(t))
	for _, tc := range []struct {
		name string
		opt  client.Option
		want string
	}{
		{"tls", client.WithTLS(&tls.Config{MinVersion: tls.VersionTLS12}), "WithTLS"},
		{"dial options", client.WithDialOptions(grpc.WithUserAgent("x")), "WithDialOptions"},
		{"empty token", client.WithToken(""), "empty token"},
	} {
		if c, err := client.New(conn, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with %s: got %v, %v, want an error mentioning %q", tc.name, c, err, tc.want)
		}
	}
	if c, err := client.Dial(deadAddr(t), client.WithToken("")); err == nil || !strings.Contains(err.Error(), "empty token") {
		t.Errorf("Dial with an empty token: got %v, %v, want an error", c, err)
	}
	if _, err := client.New(conn, client.WithTimeout(0), client.WithToken("t")); err != nil {
		t.Errorf("New with a timeout and a token: %v", err)
	}
}

// TestMiddlewareMissingToken (issue 16, item 2): a middleware whose client
// lacks the token the server requires is not silently unlimited, even in
// the default FailOpen mode: every request is refused 500, OnError hears
// each, and the log has it once.
func TestMiddlewareMissingToken(t *testing.T) {
	addr := startAuthFloodgate(t, "s3cret")
	var logged recordCounter
	var errs errorLog
	h := client.Middleware(dial(t, addr), client.HTTPConfig{
		Limit:   perMinute3,
		Logger:  slog.New(&logged),
		OnError: func(_ *http.Request, err error) { errs.add(err) },
	})(ok)
	for i := range 5 {
		wantResponse(t, "request "+string(rune('1'+i)), get(h, "192.0.2.1:1"), 500, nil, `{"error":"rate_limiter_misconfigured"}`+"\n")
	}
	if got := errs.codes(); len(got) != 5 || got[0] != codes.Unauthenticated {
		t.Fatalf("OnError saw %v, want five Unauthenticated", got)
	}
	logged.wantLogged(t, 1, "Unauthenticated")
}

// TestInterceptorMissingToken (issue 16, item 2): the same for the gRPC
// interceptors: Internal, logged once.
func TestInterceptorMissingToken(t *testing.T) {
	addr := startAuthFloodgate(t, "s3cret")
	var logged recordCounter
	hc := startProtected(t, dial(t, addr), client.InterceptorConfig{Limit: perMinute3, Logger: slog.New(&logged)})
	for i := range 4 {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Internal {
			t.Fatalf("call %d: got %v, want Internal", i+1, err)
		}
	}
	logged.wantLogged(t, 1, "Unauthenticated")
}

// switchConfig is a ConfigSource the test swaps.
type switchConfig struct{ cur atomic.Pointer[rules.Config] }

func (s *switchConfig) Current() *rules.Config { return s.cur.Load() }

// TestMisconfigLoggedOncePerEpisode: an unknown policy is refused (not
// served open) and logged once; after the policy appears and a decision
// succeeds, a new episode is logged again.
func TestMisconfigLoggedOncePerEpisode(t *testing.T) {
	parse := func(yaml string) *rules.Config {
		cfg, err := rules.Parse("policies.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	without, with := parse("policies:\n  other: {requests_per_min: 60}\n"), parse("policies:\n  free: {requests_per_min: 60}\n")
	var src switchConfig
	src.cur.Store(without)
	addr, _ := startFloodgate(t, api.Settings{Config: &src})
	var logged recordCounter
	h := client.Middleware(dial(t, addr), client.HTTPConfig{Limit: client.Policy("free"), Logger: slog.New(&logged)})(ok)

	for _, step := range []struct {
		cfg  *rules.Config
		want int
		logs int64
	}{
		{without, 500, 1}, {without, 500, 1}, {without, 500, 1},
		{with, 200, 1},
		{without, 500, 2}, {without, 500, 2},
	} {
		src.cur.Store(step.cfg)
		if got := get(h, "192.0.2.1:1").Code; got != step.want {
			t.Fatalf("got %d, want %d", got, step.want)
		}
		logged.wantLogged(t, step.logs, "NotFound")
	}
}
