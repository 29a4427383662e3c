package auth_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// Tokens of the auth tests. Long enough to spot in logs.
const (
	userToken  = "user-token-5b0f5c3e9d2a41f7"
	adminToken = "admin-token-8c1e77aa03b94d26"
	nextToken  = "next-token-1d9a0e6c5f7b4e38"
)

// streamerDesc is a server-streaming test service, to cover the stream
// interceptor on a service that needs a token (health Watch and
// reflection are open).
var streamerDesc = grpc.ServiceDesc{
	ServiceName: "floodgate.test.Streamer",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		ServerStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			var in emptypb.Empty
			if err := ss.RecvMsg(&in); err != nil {
				return err
			}
			return ss.SendMsg(&emptypb.Empty{})
		},
	}},
}

// serveAuth serves the RateLimiter, health, reflection and the test
// streamer behind a Gate checking a's tokens, as serve wires it, through
// NewGRPCServer, on a loopback TCP port.
func serveAuth(t testing.TB, a *auth.TokenAuth) *grpc.ClientConn {
	return serveAuthWith(t, a, nil)
}

// serveAuthWith is serveAuth with envoy, when not nil, served too.
func serveAuthWith(t testing.TB, a *auth.TokenAuth, envoy *server.Envoy) *grpc.ClientConn {
	t.Helper()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	gate := server.NewGate(server.TransportLimits{Auth: a})
	var rls rlsv3.RateLimitServiceServer // nil unless envoy is set
	if envoy != nil {
		rls = envoy
	}
	srv, hs := server.NewGRPCServer(server.NewRateLimiter(st, server.CheckSettings{}), rls, server.GRPCSettings{
		Logger: slog.New(slog.DiscardHandler),
		Gate:   gate,
	})
	srv.RegisterService(&streamerDesc, struct{}{})
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis = gate.Listener(lis)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func writeTokens(t testing.TB, path, content string) {
	t.Helper()
	writeAtomic(t, path, []byte(content))
}

// withAuth returns a context carrying the authorization header value.
func withAuth(authorization string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if authorization != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", authorization)
	}
	return ctx, cancel
}

// callAs makes the named call with the authorization header value.
func callAs(conn *grpc.ClientConn, call, authorization string) error {
	ctx, cancel := withAuth(authorization)
	defer cancel()
	rl := floodgatev1.NewRateLimiterClient(conn)
	switch call {
	case "Check":
		_, err := rl.Check(ctx, &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Source: testkit.Inline(10, time.Minute, 0)})
		return err
	case "Reset":
		_, err := rl.Reset(ctx, &floodgatev1.ResetRequest{Key: "k"})
		return err
	case "Health":
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	case "Reflection":
		s, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	case "Stream":
		s, err := conn.NewStream(ctx, &streamerDesc.Streams[0], "/floodgate.test.Streamer/Stream")
		if err != nil {
			return err
		}
		if err := s.SendMsg(&emptypb.Empty{}); err != nil {
			return err
		}
		if err := s.CloseSend(); err != nil {
			return err
		}
		return s.RecvMsg(&emptypb.Empty{})
	}
	panic("unknown call " + call)
}

func TestTokenAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, "# floodgate tokens\n"+userToken+"\n\n  "+adminToken+"   admin  # ops\n")
	a, err := auth.NewTokenAuth(t.Context(), path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if total, admins := a.Tokens(); total != 2 || admins != 1 {
		t.Fatalf("Tokens: got %d, %d admin; want 2, 1", total, admins)
	}
	testTokenAuth(t, serveAuth(t, a))
}

// testTokenAuth checks who may make which call on conn.
func testTokenAuth(t *testing.T, conn *grpc.ClientConn) {

	tests := []struct {
		call, auth string
		want       codes.Code
	}{
		{"Check", "", codes.Unauthenticated},
		{"Check", "Bearer wrong-token", codes.Unauthenticated},
		{"Check", "Bearer " + userToken + "x", codes.Unauthenticated},
		{"Check", "Bearer " + userToken[:len(userToken)-1], codes.Unauthenticated},
		{"Check", "Basic " + userToken, codes.Unauthenticated},
		{"Check", userToken, codes.Unauthenticated},
		{"Check", "Bearer " + userToken, codes.OK},
		{"Check", "bearer " + userToken, codes.OK},
		{"Check", "Bearer " + adminToken, codes.OK},
		{"Reset", "", codes.Unauthenticated},
		{"Reset", "Bearer wrong-token", codes.Unauthenticated},
		{"Reset", "Bearer " + userToken, codes.PermissionDenied},
		{"Reset", "Bearer " + adminToken, codes.OK},
		{"Stream", "", codes.Unauthenticated},
		{"Stream", "Bearer " + userToken, codes.OK},
		{"Health", "", codes.OK},
		{"Health", "Bearer wrong-token", codes.OK},
		{"Reflection", "", codes.OK},
	}
	for _, tc := range tests {
		t.Run(tc.call+"/"+tc.auth, func(t *testing.T) {
			err := callAs(conn, tc.call, tc.auth)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("got %v (%v), want %v", got, err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), userToken) || strings.Contains(err.Error(), adminToken)) {
				t.Fatalf("error holds a token: %v", err)
			}
			if tc.want == codes.Unauthenticated && !strings.Contains(status.Convert(err).Message(), "authorization: Bearer TOKEN") {
				t.Fatalf("Unauthenticated answer %q does not say what to send", status.Convert(err).Message())
			}
		})
	}
}

func TestTokenAuthReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, userToken+"\n"+adminToken+" admin\n")
	logs := &lockedBuffer{}
	a, err := auth.NewTokenAuth(t.Context(), path, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	conn := serveAuth(t, a)

	// Rotate: nextToken in, userToken out, adminToken demoted.
	writeTokens(t, path, nextToken+" admin\n"+adminToken+"\n")
	testkit.Eventually(t, "the new token to be accepted", func() bool {
		return callAs(conn, "Check", "Bearer "+nextToken) == nil
	})
	if got := status.Code(callAs(conn, "Check", "Bearer "+userToken)); got != codes.Unauthenticated {
		t.Fatalf("removed token: got %v, want Unauthenticated", got)
	}
	if got := status.Code(callAs(conn, "Reset", "Bearer "+adminToken)); got != codes.PermissionDenied {
		t.Fatalf("demoted token on Reset: got %v, want PermissionDenied", got)
	}
	if got := status.Code(callAs(conn, "Reset", "Bearer "+nextToken)); got != codes.OK {
		t.Fatalf("new admin token on Reset: got %v, want OK", got)
	}

	// A bad file is rejected; the tokens in force stay.
	writeTokens(t, path, nextToken+" root\n")
	if err := a.Reload(); err == nil || !strings.Contains(err.Error(), path+":1:") {
		t.Fatalf("Reload of a bad file: got %v, want an error at %s:1", err, path)
	}
	if got := status.Code(callAs(conn, "Reset", "Bearer "+nextToken)); got != codes.OK {
		t.Fatalf("after a rejected reload: got %v, want OK (old tokens in force)", got)
	}
	// So is an empty one, and a missing one.
	writeTokens(t, path, "# nobody\n")
	if err := a.Reload(); err == nil || !strings.Contains(err.Error(), "no tokens") {
		t.Fatalf("Reload of an empty file: got %v, want no tokens", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil {
		t.Fatal("Reload of a missing file: got nil, want an error")
	}
	if got := status.Code(callAs(conn, "Check", "Bearer "+adminToken)); got != codes.OK {
		t.Fatalf("after rejected reloads: got %v, want OK", got)
	}
	out := logs.String()
	if !strings.Contains(out, "auth tokens reloaded") || !strings.Contains(out, "auth tokens reload rejected") {
		t.Fatalf("logs lack the reload and the rejection:\n%s", out)
	}
	for _, tok := range []string{userToken, adminToken, nextToken} {
		if strings.Contains(out, tok) {
			t.Fatalf("logs hold token %q:\n%s", tok, out)
		}
	}
}

func TestParseTokenFile(t *testing.T) {
	tests := []struct {
		name       string
		content    string
		wantTotal  int
		wantAdmins int
		wantErr    string
	}{
		{"one", "abc\n", 1, 0, ""},
		{"no final newline", "abc admin", 1, 1, ""},
		{"comments and blanks", "# c\n\n   \nabc # trailing\n\tdef admin #x\n", 2, 1, ""},
		{"comment glued", "abc #comment\n", 1, 0, ""},
		{"crlf", "abc\r\ndef admin\r\n", 2, 1, ""},
		{"empty", "", 0, 0, "no tokens"},
		{"only comments", "# a\n#b\n", 0, 0, "no tokens"},
		{"unknown role", "abc\nsecret-one root\n", 0, 0, ":2: want a token optionally followed by the roles \"admin\" and \"refund\""},
		{"three fields", "secret-one admin extra\n", 0, 0, ":1: want a token"},
		{"refund role", "abc refund\ndef admin refund\nghi refund admin\n", 3, 2, ""},
		{"role twice", "secret-one refund refund\n", 0, 0, ":1: want a token"},
		{"duplicate", "secret-one\n\nsecret-one admin\n", 0, 0, ":3: duplicate token (first on line 1)"},
		{"non-ASCII", "secret-\u00e9\n", 0, 0, ":1: a token may hold only printable ASCII"},
		{"control char", "secret-\x01one\n", 0, 0, ":1: a token may hold only printable ASCII"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			writeTokens(t, path, tc.content)
			a, err := auth.NewTokenAuth(t.Context(), path, slog.New(slog.DiscardHandler))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Fatalf("error holds a token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			if total, admins := a.Tokens(); total != tc.wantTotal || admins != tc.wantAdmins {
				t.Fatalf("got %d tokens, %d admin; want %d, %d", total, admins, tc.wantTotal, tc.wantAdmins)
			}
		})
	}
	if _, err := auth.NewTokenAuth(t.Context(), filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Fatal("missing file: got nil, want an error")
	}
}

// TestRefundPermission: with tokens configured, a
// refund (is_negative_hits) needs a token with the refund or admin role;
// other tokens may still charge. With NoRefunds no token may refund. A
// refused refund is answered as 0 hits, never an error.
func TestRefundPermission(t *testing.T) {
	const refundToken = "refund-token-4e2b9c71d05a3f68"
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, userToken+"\n"+adminToken+" admin\n"+refundToken+" refund\n")
	a, err := auth.NewTokenAuth(t.Context(), path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	cfg, err := rules.Parse("edge.yaml", []byte(testkit.EnvoyRules))
	if err != nil {
		t.Fatal(err)
	}
	ip := func(refund bool) *rlsv3.RateLimitRequest {
		d := testkit.Descriptor("remote_address", "192.0.2.77")
		d.IsNegativeHits = refund
		return &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
	}
	for _, mode := range []struct {
		name      string
		noRefunds bool
	}{{"refunds on", false}, {"refunds off", true}} {
		t.Run(mode.name, func(t *testing.T) {
			st := memstore.New(memstore.Config{})
			t.Cleanup(func() { st.Close() })
			envoy := server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Rules: testkit.StaticRules(cfg), Clock: testkit.NewClock(testkit.T0).Now}, NoRefunds: mode.noRefunds})
			rls := rlsv3.NewRateLimitServiceClient(serveAuthWith(t, a, envoy))
			call := func(token string, refund bool) (*rlsv3.RateLimitResponse, error) {
				ctx, cancel := withAuth("Bearer " + token)
				defer cancel()
				return rls.ShouldRateLimit(ctx, ip(refund))
			}
			// Spend the 3/s, so a refund shows in what remains.
			for range 3 {
				if _, err := call(userToken, false); err != nil {
					t.Fatalf("charge with a plain token: %v", err)
				}
			}
			// A refused refund is no error (Envoy would let the request
			// through): it is decided as 0 hits, a look at the spent limit.
			refunderGives := !mode.noRefunds
			for _, tc := range []struct {
				name, token string
				want        codes.Code
				gives       bool
			}{
				{"no token", "", codes.Unauthenticated, false},
				{"plain token", userToken, codes.OK, false},
				{"refund token", refundToken, codes.OK, refunderGives},
				{"admin token", adminToken, codes.OK, refunderGives},
			} {
				r, err := call(tc.token, true)
				if got := status.Code(err); got != tc.want {
					t.Errorf("refund with %s: %v (%v), want %v", tc.name, got, err, tc.want)
					continue
				}
				if tc.want != codes.OK {
					continue
				}
				if gave := r.GetStatuses()[0].GetLimitRemaining() > 0; gave != tc.gives {
					t.Errorf("refund with %s: %v, want the hit given back: %v", tc.name, r, tc.gives)
				}
				if !tc.gives && r.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
					t.Errorf("refused refund with %s: %v, want the spent limit's OVER_LIMIT", tc.name, r)
				}
			}
			// Charging needs no role.
			if _, err := call(userToken, false); err != nil {
				t.Errorf("charge with a plain token after the refunds: %v", err)
			}
		})
	}
}

// TestLeakyGiveBackPermission: a Check with a negative cost
// gives a leaky bucket's slots back, a refund: with tokens configured it
// needs the refund or admin role, alone or in a batch.
func TestLeakyGiveBackPermission(t *testing.T) {
	const refundToken = "refund-token-91d3c0b7e25f4a68"
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, userToken+"\n"+adminToken+" admin\n"+refundToken+" refund\n")
	a, err := auth.NewTokenAuth(t.Context(), path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	rl := floodgatev1.NewRateLimiterClient(serveAuth(t, a))
	req := func(cost int64) *floodgatev1.CheckRequest {
		return &floodgatev1.CheckRequest{Key: "partner", Algorithm: floodgatev1.Algorithm_ALGORITHM_LEAKY_BUCKET, Cost: cost, Source: testkit.Inline(20, time.Second, 0)}
	}
	for _, tc := range []struct {
		name, token string
		cost        int64
		batch       bool
		want        codes.Code
	}{
		{"take, plain token", userToken, 1, false, codes.OK},
		{"give back, plain token", userToken, -1, false, codes.PermissionDenied},
		{"give back in a batch, plain token", userToken, -1, true, codes.PermissionDenied},
		{"give back, refund token", refundToken, -1, false, codes.OK},
		{"give back, admin token", adminToken, -1, true, codes.OK},
	} {
		ctx, cancel := withAuth("Bearer " + tc.token)
		if tc.batch {
			_, err = rl.CheckBatch(ctx, &floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{req(1), req(tc.cost)}})
		} else {
			_, err = rl.Check(ctx, req(tc.cost))
		}
		cancel()
		if got := status.Code(err); got != tc.want {
			t.Errorf("%s: %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}
