package grpclimit_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/grpclimit"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

var perMinute3 = client.Limit{Algorithm: algorithms.TokenBucket, Requests: 3, Period: time.Minute}

// startProtected serves grpc.health.v1 (a unary Check and a streaming
// Watch) behind the interceptors, on real TCP, and returns a health client.
func startProtected(t *testing.T, c *client.Client, cfg grpclimit.Config) healthpb.HealthClient {
	t.Helper()
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(c, cfg)),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(c, cfg)))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
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
	return healthpb.NewHealthClient(conn)
}

func mdString(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

// wantNumbers checks the rate-limit metadata of one call.
func wantNumbers(t *testing.T, what string, md metadata.MD, limit, remaining, reset, retry string) {
	t.Helper()
	got := [4]string{mdString(md, "ratelimit-limit"), mdString(md, "ratelimit-remaining"), mdString(md, "ratelimit-reset"), mdString(md, "retry-after")}
	if want := [4]string{limit, remaining, reset, retry}; got != want {
		t.Fatalf("%s: got limit/remaining/reset/retry-after %q, want %q", what, got, want)
	}
}

// wantRetryInfo checks err is ResourceExhausted with a RetryInfo of want.
func wantRetryInfo(t *testing.T, err error, want time.Duration) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("got %v, want ResourceExhausted", err)
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			if got := ri.GetRetryDelay().AsDuration(); got != want {
				t.Fatalf("RetryInfo: got %v, want %v", got, want)
			}
			return
		}
	}
	t.Fatalf("no RetryInfo in %v", st.Details())
}

// TestUnaryInterceptor: allowed calls pass with headers; the denied one
// gets ResourceExhausted, RetryInfo and trailers.
func TestUnaryInterceptor(t *testing.T) {
	addr, clock := floodgatetest.Start(t, nil)
	hc := startProtected(t, floodgatetest.Dial(t, addr), grpclimit.Config{
		Limit: client.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Period: time.Minute},
		Key:   grpclimit.KeyByMethod,
	})
	ctx := context.Background()
	for i, remaining := range []string{"1", "0"} {
		var hdr metadata.MD
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr)); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		wantNumbers(t, "allowed call headers", hdr, "2", remaining, "60", "")
	}
	var hdr, trl metadata.MD
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
	wantRetryInfo(t, err, time.Minute)
	wantNumbers(t, "denied call trailers", trl, "2", "0", "60", "60")

	clock.Advance(59*time.Second + 500*time.Millisecond) // waits round up
	_, err = hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trl))
	wantRetryInfo(t, err, 500*time.Millisecond)
	wantNumbers(t, "denied call trailers", trl, "2", "0", "1", "1")

	clock.Advance(500 * time.Millisecond)
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("next window: %v", err)
	}
}

// TestStreamInterceptor: a stream is limited once, when it opens.
func TestStreamInterceptor(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	hc := startProtected(t, floodgatetest.Dial(t, addr), grpclimit.Config{
		Limit: client.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Period: 10 * time.Second},
		Key:   grpclimit.KeyByPeer,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	s1, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Recv(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	hdr, err := s1.Header()
	if err != nil {
		t.Fatal(err)
	}
	wantNumbers(t, "allowed stream headers", hdr, "1", "0", "10", "")

	s2, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s2.Recv()
	wantRetryInfo(t, err, 10*time.Second)
	wantNumbers(t, "denied stream trailers", s2.Trailer(), "1", "0", "10", "10")
}

// TestInterceptorKeys: each key has its own limit, and a key the caller
// writes spends its peer's too; a call without a key spends its peer's.
func TestInterceptorKeys(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	hc := startProtected(t, floodgatetest.Dial(t, addr), grpclimit.Config{
		Limit:     client.Limit{Algorithm: algorithms.SlidingWindow, Requests: 2, Period: time.Minute},
		Key:       grpclimit.KeyByMetadata("X-API-Key"),
		KeyPrefix: "health:",
	})
	call := func(apiKey string) codes.Code {
		ctx := context.Background()
		if apiKey != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", apiKey)
		}
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return status.Code(err)
	}
	for i, tc := range []struct {
		key  string
		want codes.Code
	}{
		{"alice", codes.OK}, {"alice", codes.OK}, {"alice", codes.ResourceExhausted},
		{"bob", codes.ResourceExhausted}, // a fresh key, but the peer's limit is spent
		{"", codes.ResourceExhausted},    // no key: the peer's limit
	} {
		if got := call(tc.key); got != tc.want {
			t.Fatalf("call %d with key %q: got %v, want %v", i+1, tc.key, got, tc.want)
		}
	}
}

// TestKeyFuncs pins the key functions and their composition.
func TestKeyFuncs(t *testing.T) {
	const m = "/pkg.Svc/Do"
	withPeer := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 5555}})
	withBoth := metadata.NewIncomingContext(withPeer, metadata.Pairs("x-api-key", "k1"))
	bare := context.Background()
	apiKey := grpclimit.KeyByMetadata("x-api-key")
	hashed := apiKey(withBoth, m)

	for _, tc := range []struct {
		name string
		f    grpclimit.KeyFunc
		ctx  context.Context
		want string
	}{
		{"method", grpclimit.KeyByMethod, bare, "method:/pkg.Svc/Do"},
		{"peer drops the port", grpclimit.KeyByPeer, withPeer, "peer:10.0.0.7"},
		{"no peer", grpclimit.KeyByPeer, bare, ""},
		{"no metadata", apiKey, withPeer, ""},
		{"first: key", grpclimit.KeyFirst(apiKey, grpclimit.KeyByPeer), withBoth, hashed},
		{"first: fallback", grpclimit.KeyFirst(apiKey, grpclimit.KeyByPeer), withPeer, "peer:10.0.0.7"},
		{"first: none", grpclimit.KeyFirst(apiKey, grpclimit.KeyByPeer), bare, ""},
		{"join", grpclimit.KeyJoin(grpclimit.KeyByMethod, grpclimit.KeyByPeer), withPeer, "method:/pkg.Svc/Do|peer:10.0.0.7"},
		{"join: a part missing", grpclimit.KeyJoin(grpclimit.KeyByMethod, apiKey), withPeer, ""},
	} {
		if got := tc.f(tc.ctx, m); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	// The API key is hashed: stable, distinct per value, secret-free.
	if len(hashed) != len("x-api-key:")+32 || hashed[:10] != "x-api-key:" || hashed == apiKey(metadata.NewIncomingContext(bare, metadata.Pairs("x-api-key", "k2")), m) {
		t.Errorf("hashed key %q: want x-api-key: and 32 hex digits, distinct per value", hashed)
	}
	if again := apiKey(withBoth, m); again != hashed {
		t.Errorf("hash not stable: %q then %q", hashed, again)
	}
}

// TestInterceptorFailureModes: when floodgate is unreachable or too slow,
// FailOpen lets calls through and FailClosed answers Unavailable.
func TestInterceptorFailureModes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		addr    string
		mode    client.FailureMode
		want    codes.Code
		wantErr codes.Code
		timeout time.Duration // the interceptor's: long enough for a refused dial on a busy machine
	}{
		{"unreachable, open", floodgatetest.DeadAddr(t), client.FailOpen, codes.OK, codes.Unavailable, 5 * time.Second},
		{"unreachable, closed", floodgatetest.DeadAddr(t), client.FailClosed, codes.Unavailable, codes.Unavailable, 5 * time.Second},
		{"hanging, open", floodgatetest.StartHanging(t), client.FailOpen, codes.OK, codes.DeadlineExceeded, 30 * time.Millisecond},
		{"hanging, closed", floodgatetest.StartHanging(t), client.FailClosed, codes.Unavailable, codes.DeadlineExceeded, 30 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log floodgatetest.ErrorLog
			hc := startProtected(t, floodgatetest.Dial(t, tc.addr, client.WithTimeout(time.Hour)), grpclimit.Config{
				Limit:       perMinute3,
				FailureMode: tc.mode,
				Timeout:     tc.timeout, // overrides the client's hour
				OnError:     func(_ context.Context, _ string, err error) { log.Add(err) },
			})
			var hdr metadata.MD
			_, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
			if got := status.Code(err); got != tc.want {
				t.Fatalf("unary: got %v, want %v", err, tc.want)
			}
			if mdString(hdr, "ratelimit-limit") != "" {
				t.Errorf("headers without a decision: %v", hdr)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			if got := status.Code(err); got != tc.want {
				t.Fatalf("stream: got %v, want %v", err, tc.want)
			}
			if got := log.Codes(); len(got) != 2 || !errCodeOK(got[0], tc.wantErr) || !errCodeOK(got[1], tc.wantErr) {
				t.Fatalf("OnError saw %v, want two %v", got, tc.wantErr)
			}
		})
	}
}

// TestInterceptorDegraded: when floodgate's own store is down it answers
// from each limit's failure mode; the interceptors pass the answer on,
// marked degraded (client.TestDegraded: the client; httplimit's
// TestMiddlewareDegradedHeaders: the middleware).
func TestInterceptorDegraded(t *testing.T) {
	cfg := floodgatetest.StaticRules(t, "policies:\n  login: {algorithm: sliding_window, requests: 5, period: 15m, failure_mode: closed}\n")
	c := floodgatetest.Dial(t, floodgatetest.StartDegraded(t, cfg)) // inline limits fail open
	ctx := context.Background()

	open := startProtected(t, c, grpclimit.Config{Limit: perMinute3})
	var hdr metadata.MD
	if _, err := open.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr)); err != nil {
		t.Fatalf("open: %v", err)
	}
	if mdString(hdr, "ratelimit-degraded") != "true" {
		t.Fatalf("open: headers %v, want ratelimit-degraded: true", hdr)
	}
	closed := startProtected(t, c, grpclimit.Config{Limit: client.Policy("login")})
	var trl metadata.MD
	_, err := closed.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trl))
	wantRetryInfo(t, err, time.Second)
	if mdString(trl, "ratelimit-degraded") != "true" || mdString(trl, "retry-after") != "1" {
		t.Fatalf("closed: trailers %v, want ratelimit-degraded: true, retry-after: 1", trl)
	}
}

// errCodeOK reports whether got is the error code a case wants. An
// unreachable floodgate is refused (Unavailable) unless its freed port was
// taken meanwhile by another test's server that never answers, which
// times out instead: both say "floodgate could not decide".
func errCodeOK(got, want codes.Code) bool {
	return got == want || (want == codes.Unavailable && got == codes.DeadlineExceeded)
}

// TestInterceptorWarning: an allowed call past the limit's warning
// threshold carries ratelimit-warning; below it and on a denial none.
func TestInterceptorWarning(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	hc := startProtected(t, floodgatetest.Dial(t, addr), grpclimit.Config{
		Limit: client.Limit{Algorithm: algorithms.FixedWindow, Requests: 3, Period: time.Minute, WarnAt: 2},
		Key:   grpclimit.KeyByMethod,
	})
	for i, want := range []string{"", `"call";at=2`, `"call";at=2`} {
		var hdr metadata.MD
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&hdr)); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if got := mdString(hdr, grpclimit.MDWarning); got != want {
			t.Fatalf("call %d: ratelimit-warning %q, want %q", i+1, got, want)
		}
	}
	var hdr, trl metadata.MD
	_, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
	wantRetryInfo(t, err, time.Minute)
	if mdString(hdr, grpclimit.MDWarning) != "" || mdString(trl, grpclimit.MDWarning) != "" {
		t.Fatalf("denied call: ratelimit-warning in %v / %v", hdr, trl)
	}
}
