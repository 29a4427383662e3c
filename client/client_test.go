package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

var perMinute3 = client.Limit{Algorithm: algorithms.TokenBucket, Requests: 3, Period: time.Minute}

// TestCheckPeekReset walks one key through every single-key RPC.
func TestCheckPeekReset(t *testing.T) {
	addr, clock := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	ctx := context.Background()

	for i, want := range []client.Decision{
		{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 20 * time.Second},
		{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 40 * time.Second},
		{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: time.Minute},
		{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: 20 * time.Second, ResetAfter: time.Minute},
	} {
		got, err := c.Check(ctx, client.Request{Key: "user:1", Limit: perMinute3})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("check %d: got %+v, want %+v", i+1, got, want)
		}
	}

	// Peek charges nothing: twice the same answer.
	for range 2 {
		got, err := c.Peek(ctx, client.Request{Key: "user:1", Limit: perMinute3})
		if err != nil {
			t.Fatal(err)
		}
		if want := (client.Decision{Limit: 3, RetryAfter: 20 * time.Second, ResetAfter: time.Minute}); got != want {
			t.Fatalf("peek: got %+v, want %+v", got, want)
		}
	}

	clock.Advance(40 * time.Second) // two tokens back
	got, err := c.Check(ctx, client.Request{Key: "user:1", Limit: perMinute3, Cost: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := (client.Decision{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: time.Minute}); got != want {
		t.Fatalf("cost 2 after 40s: got %+v, want %+v", got, want)
	}

	other := client.Limit{Algorithm: perMinute3.Algorithm, Requests: 7, Period: time.Minute}
	if _, err := c.Check(ctx, client.Request{Key: "user:1", Limit: other}); err != nil {
		t.Fatal(err)
	}
	if err := c.ResetLimit(ctx, "user:1", other); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Peek(ctx, client.Request{Key: "user:1", Limit: other}); err != nil || got.Remaining != 7 {
		t.Fatalf("peek after ResetLimit: got %+v %v, want 7 remaining", got, err)
	}
	if got, err := c.Peek(ctx, client.Request{Key: "user:1", Limit: perMinute3}); err != nil || got.Remaining != 0 {
		t.Fatalf("ResetLimit of another limit reset this one: got %+v %v, want 0 remaining", got, err)
	}
	if err := c.Reset(ctx, "user:1", algorithms.Unspecified); err != nil {
		t.Fatal(err)
	}
	got, err = c.Peek(ctx, client.Request{Key: "user:1", Limit: perMinute3, Cost: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := (client.Decision{Allowed: true, Limit: 3, Remaining: 3}); got != want {
		t.Fatalf("peek after reset: got %+v, want %+v", got, want)
	}
}

// TestCheckBatchAllOrNothing: a batch denied by one key charges no other.
func TestCheckBatchAllOrNothing(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	ctx := context.Background()
	one := client.Limit{Algorithm: algorithms.SlidingWindow, Requests: 1, Period: time.Minute}

	if d, err := c.Check(ctx, client.Request{Key: "full", Limit: one}); err != nil || !d.Allowed {
		t.Fatalf("filling: got %+v, %v", d, err)
	}
	b, err := c.CheckBatch(ctx,
		client.Request{Key: "fresh", Limit: one},
		client.Request{Key: "full", Limit: one})
	if err != nil {
		t.Fatal(err)
	}
	if b.Allowed || len(b.Decisions) != 2 || !b.Decisions[0].Allowed || b.Decisions[1].Allowed || b.Decisions[1].RetryAfter <= 0 {
		t.Fatalf("got %+v, want denied with [fits, denied with a wait]", b)
	}
	if d, err := c.Peek(ctx, client.Request{Key: "fresh", Limit: one}); err != nil || d.Remaining != 1 {
		t.Fatalf("fresh after a denied batch: got %+v, %v, want remaining 1 (not charged)", d, err)
	}

	b, err = c.CheckBatch(ctx, client.Request{Key: "fresh", Limit: one}, client.Request{Key: "other", Limit: one})
	if err != nil || !b.Allowed || b.Decisions[0].Remaining != 0 || b.Decisions[1].Remaining != 0 {
		t.Fatalf("got %+v, %v, want both allowed with remaining 0", b, err)
	}
}

// TestPolicy: a named policy decides, with the policy's algorithm.
func TestPolicy(t *testing.T) {
	cfg := floodgatetest.StaticRules(t, "policies:\n  login: {algorithm: sliding_window, requests: 2, period: 15m, failure_mode: closed}\n")
	addr, _ := floodgatetest.Start(t, cfg)
	c := floodgatetest.Dial(t, addr)
	ctx := context.Background()
	var allowed []bool
	for range 3 {
		d, err := c.Check(ctx, client.Request{Key: "login:alice", Limit: client.Policy("login")})
		if err != nil {
			t.Fatal(err)
		}
		if d.Limit != 2 {
			t.Fatalf("limit: got %d, want 2", d.Limit)
		}
		allowed = append(allowed, d.Allowed)
	}
	if allowed[0] != true || allowed[1] != true || allowed[2] != false {
		t.Fatalf("got %v, want [true true false]", allowed)
	}
	// Naming the policy's own algorithm is fine too.
	l := client.Policy("login")
	l.Algorithm = algorithms.SlidingWindow
	if _, err := c.Check(ctx, client.Request{Key: "login:bob", Limit: l}); err != nil {
		t.Fatal(err)
	}
}

// TestErrors: every way floodgate cannot decide surfaces as an error with
// its gRPC code.
func TestErrors(t *testing.T) {
	addr, _ := floodgatetest.Start(t, floodgatetest.StaticRules(t, "policies:\n  free: {requests_per_min: 15, burst: 30}\n"))
	c := floodgatetest.Dial(t, addr)
	hang := floodgatetest.Dial(t, floodgatetest.StartHanging(t), client.WithTimeout(20*time.Millisecond))
	dead := floodgatetest.Dial(t, floodgatetest.DeadAddr(t))
	ctx := context.Background()

	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}{
		{"no algorithm", func() error {
			_, err := c.Check(ctx, client.Request{Key: "k", Limit: client.Limit{Requests: 1, Period: time.Second}})
			return err
		}, codes.InvalidArgument, "algorithm: required"},
		{"empty key", func() error { _, err := c.Check(ctx, client.Request{Key: "", Limit: perMinute3}); return err }, codes.InvalidArgument, "key: must not be empty"},
		{"cost over capacity", func() error { _, err := c.Check(ctx, client.Request{Key: "k", Limit: perMinute3, Cost: 4}); return err }, codes.InvalidArgument, "cost: 4 exceeds"},
		{"sub-millisecond period", func() error {
			_, err := c.Peek(ctx, client.Request{Key: "k", Limit: client.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Period: time.Microsecond}})
			return err
		}, codes.InvalidArgument, "limit.period"},
		{"unknown policy", func() error {
			_, err := c.Check(ctx, client.Request{Key: "k", Limit: client.Policy("gold")})
			return err
		}, codes.NotFound, `unknown policy "gold"`},
		{"policy algorithm mismatch", func() error {
			_, err := c.Check(ctx, client.Request{Key: "k", Limit: client.Limit{Policy: "free", Algorithm: algorithms.FixedWindow}})
			return err
		}, codes.InvalidArgument, "does not match policy"},
		{"batch: empty", func() error { _, err := c.CheckBatch(ctx); return err }, codes.InvalidArgument, "checks"},
		{"batch: bad item", func() error {
			_, err := c.CheckBatch(ctx, client.Request{Key: "a", Limit: perMinute3}, client.Request{Key: "", Limit: perMinute3})
			return err
		}, codes.InvalidArgument, "checks[1].key"},
		{"reset: bad algorithm", func() error { return c.Reset(ctx, "k", algorithms.Algorithm(99)) }, codes.InvalidArgument, "algorithm"},
		{"both policy and requests", func() error {
			_, err := c.Check(ctx, client.Request{Key: "k", Limit: client.Limit{Policy: "free", Requests: 3}})
			return err
		}, codes.InvalidArgument, "both a policy and requests"}, // refused before asking, with floodgate's code
		{"unreachable", func() error { _, err := dead.Check(ctx, client.Request{Key: "k", Limit: perMinute3}); return err }, codes.Unavailable, ""},
		{"unreachable batch", func() error {
			_, err := dead.CheckBatch(ctx, client.Request{Key: "k", Limit: perMinute3})
			return err
		}, codes.Unavailable, ""},
		{"unreachable reset", func() error { return dead.Reset(ctx, "k", algorithms.Unspecified) }, codes.Unavailable, ""},
		{"timeout", func() error { _, err := hang.Check(ctx, client.Request{Key: "k", Limit: perMinute3}); return err }, codes.DeadlineExceeded, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil {
				t.Fatal("got no error")
			}
			if got := status.Code(err); got != tc.code {
				t.Fatalf("got code %v (%v), want %v", got, err, tc.code)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %q, want it to contain %q", err, tc.msg)
			}
		})
	}
}

// TestCallerDeadlineWins: a context deadline shorter than the client's
// timeout bounds the call.
func TestCallerDeadlineWins(t *testing.T) {
	c := floodgatetest.Dial(t, floodgatetest.StartHanging(t), client.WithTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Check(ctx, client.Request{Key: "k", Limit: perMinute3}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
}

// TestClientWithTimeout: a copy with its own timeout bounds its calls by
// it, leaves the original's alone, and does not close the shared
// connection.
func TestClientWithTimeout(t *testing.T) {
	hang := floodgatetest.Dial(t, floodgatetest.StartHanging(t), client.WithTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // if the copy kept the hour
	defer cancel()
	start := time.Now()
	if _, err := hang.WithTimeout(20*time.Millisecond).Check(ctx, client.Request{Key: "k", Limit: perMinute3}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("copy with 20ms: got %v, want DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("copy with 20ms waited %v: it kept the original's hour", waited)
	}

	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	short := c.WithTimeout(time.Hour)
	if err := short.Close(); err != nil {
		t.Fatalf("closing the copy: %v", err)
	}
	if _, err := c.Check(context.Background(), client.Request{Key: "k", Limit: perMinute3}); err != nil {
		t.Fatalf("the original after closing the copy: %v", err)
	}
}

// tokenRecorder is a server interceptor that keeps every call's
// authorization metadata.
type tokenRecorder struct {
	mu  sync.Mutex
	got []string
}

func (r *tokenRecorder) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	r.got = append(r.got, strings.Join(md.Get("authorization"), ","))
	r.mu.Unlock()
	return h(ctx, req)
}

func (r *tokenRecorder) tokens() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// TestToken: the bearer token is sent, over plaintext only to loopback.
func TestToken(t *testing.T) {
	rec := &tokenRecorder{}
	addr, _ := floodgatetest.Start(t, nil, grpc.ChainUnaryInterceptor(rec.intercept))
	c := floodgatetest.Dial(t, addr, client.WithToken("s3cret"))
	if _, err := c.Check(context.Background(), client.Request{Key: "k", Limit: perMinute3}); err != nil {
		t.Fatal(err)
	}
	if got := rec.tokens(); len(got) != 1 || got[0] != "Bearer s3cret" {
		t.Fatalf("server saw %q, want [\"Bearer s3cret\"]", got)
	}

	for _, target := range []string{"floodgate.internal:8081", "dns:///floodgate:8081", "10.0.0.7:8081"} {
		if _, err := client.Dial(target, client.WithToken("s3cret")); err == nil || !strings.Contains(err.Error(), "needs WithTLS") {
			t.Errorf("Dial(%q) with a token and no TLS: got %v, want a refusal", target, err)
		}
	}
	for _, target := range []string{"localhost:8081", "[::1]:8081", "passthrough:///127.0.0.1:8081", "unix:///run/floodgate.sock"} {
		c, err := client.Dial(target, client.WithToken("s3cret"))
		if err != nil {
			t.Errorf("Dial(%q) with a token: %v", target, err)
			continue
		}
		c.Close()
	}
}

// TestTLS: WithTLS talks to a TLS floodgate, with a token, to a
// non-loopback name.
func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t, "floodgate.test")
	rec := &tokenRecorder{}
	addr, _ := floodgatetest.Start(t, nil,
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})),
		grpc.ChainUnaryInterceptor(rec.intercept))
	_, port, _ := net.SplitHostPort(addr)

	// "floodgate.test" is not loopback, so the token needs TLS; the dialer
	// takes it to our server.
	toServer := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	})
	c := floodgatetest.Dial(t, "passthrough:///floodgate.test:"+port,
		client.WithTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		client.WithToken("s3cret"),
		client.WithDialOptions(toServer),
		client.WithTimeout(10*time.Second)) // a TLS handshake on a loaded machine can take longer than the default

	d, err := c.Check(context.Background(), client.Request{Key: "k", Limit: perMinute3})
	if err != nil || !d.Allowed {
		t.Fatalf("got %+v, %v, want allowed", d, err)
	}
	if got := rec.tokens(); len(got) != 1 || got[0] != "Bearer s3cret" {
		t.Fatalf("server saw %q, want [\"Bearer s3cret\"]", got)
	}

	// A client without TLS cannot talk to it.
	plain := floodgatetest.Dial(t, addr)
	if _, err := plain.Check(context.Background(), client.Request{Key: "k", Limit: perMinute3}); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext to a TLS server: got %v, want Unavailable", err)
	}
}

// selfSigned makes a certificate for name and a pool that trusts it.
func selfSigned(t *testing.T, name string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestDegraded: when floodgate's own store is down it answers from each
// limit's failure mode; the client passes the answer on, marked degraded.
func TestDegraded(t *testing.T) {
	cfg := floodgatetest.StaticRules(t, "policies:\n  login: {algorithm: sliding_window, requests: 5, period: 15m, failure_mode: closed}\n")
	c := floodgatetest.Dial(t, floodgatetest.StartDegraded(t, cfg)) // inline limits fail open
	ctx := context.Background()

	d, err := c.Check(ctx, client.Request{Key: "k", Limit: perMinute3})
	if want := (client.Decision{Allowed: true, Limit: 3, Degraded: true}); err != nil || d != want {
		t.Fatalf("inline: got %+v, %v, want %+v", d, err, want)
	}
	d, err = c.Check(ctx, client.Request{Key: "k", Limit: client.Policy("login")})
	if want := (client.Decision{Allowed: false, Limit: 5, RetryAfter: time.Second, Degraded: true}); err != nil || d != want {
		t.Fatalf("closed policy: got %+v, %v, want %+v", d, err, want)
	}
}
