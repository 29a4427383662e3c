package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/testkit/testpki"
)

// writeFile writes data to name in dir and returns the path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	return testpki.WriteFile(t, dir, name, data)
}

// pki is what a TLS test needs: the server's files, and clients.
type pki struct {
	dir                   string
	ca, otherCA           *testpki.CA
	serverCert, serverKey string
	caFile                string
	clientCert, clientKey string // signed by ca
	otherCert, otherKey   string // signed by otherCA
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), ca: testpki.NewCA(t, "floodgate test CA"), otherCA: testpki.NewCA(t, "another CA")}
	c, k, _ := p.ca.Issue(t, "floodgate", true)
	p.serverCert, p.serverKey = writeFile(t, p.dir, "server.pem", c), writeFile(t, p.dir, "server-key.pem", k)
	p.caFile = writeFile(t, p.dir, "ca.pem", p.ca.PEM)
	c, k, _ = p.ca.Issue(t, "service-a", false)
	p.clientCert, p.clientKey = writeFile(t, p.dir, "client.pem", c), writeFile(t, p.dir, "client-key.pem", k)
	c, k, _ = p.otherCA.Issue(t, "intruder", false)
	p.otherCert, p.otherKey = writeFile(t, p.dir, "other.pem", c), writeFile(t, p.dir, "other-key.pem", k)
	return p
}

// dialTLS connects to addr verifying the server with ca; with a client
// certificate when certFile is set.
func dialTLS(t *testing.T, addr string, ca *testpki.CA, certFile, keyFile string) *grpc.ClientConn {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// inlineCheck is a Check on key with a generous inline limit.
func inlineCheck(key string) *floodgatev1.CheckRequest {
	return &floodgatev1.CheckRequest{
		Key: key, Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
		Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 100, Period: durationpb.New(time.Hour)}},
	}
}

// callCode is the status code of one Check on conn with ctx (a deadline
// added).
func callCode(ctx context.Context, conn *grpc.ClientConn) codes.Code {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := floodgatev1.NewRateLimiterClient(conn).Check(ctx, inlineCheck("sec"))
	return status.Code(err)
}

// withToken adds the bearer token to ctx.
func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// TestSecurityTLS: with --tls-cert and --tls-key, a client that trusts the
// CA is served; a plaintext client, or one that does not trust the CA, is
// refused with Unavailable.
func TestSecurityTLS(t *testing.T) {
	k := newPKI(t)
	p := startServe(t, "--tls-cert", k.serverCert, "--tls-key", k.serverKey)
	ctx := context.Background()
	if code := callCode(ctx, dialTLS(t, p.GRPCAddr, k.ca, "", "")); code != codes.OK {
		t.Errorf("TLS client trusting the CA: %v, want OK", code)
	}
	if code := callCode(ctx, dialTLS(t, p.GRPCAddr, k.otherCA, "", "")); code != codes.Unavailable {
		t.Errorf("TLS client trusting another CA: %v, want Unavailable", code)
	}
	plain, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if code := callCode(ctx, plain); code != codes.Unavailable {
		t.Errorf("plaintext client: %v, want Unavailable", code)
	}
}

// TestSecurityMTLS: with --tls-client-ca, only clients presenting a
// certificate that CA signed are served; none, or one from another CA, is
// refused with Unavailable. `floodgate check` speaks mTLS with its flags.
func TestSecurityMTLS(t *testing.T) {
	k := newPKI(t)
	p := startServe(t, "--tls-cert", k.serverCert, "--tls-key", k.serverKey, "--tls-client-ca", k.caFile)
	ctx := context.Background()
	if code := callCode(ctx, dialTLS(t, p.GRPCAddr, k.ca, k.clientCert, k.clientKey)); code != codes.OK {
		t.Errorf("client with a certificate from the CA: %v, want OK", code)
	}
	if code := callCode(ctx, dialTLS(t, p.GRPCAddr, k.ca, "", "")); code != codes.Unavailable {
		t.Errorf("client without a certificate: %v, want Unavailable", code)
	}
	if code := callCode(ctx, dialTLS(t, p.GRPCAddr, k.ca, k.otherCert, k.otherKey)); code != codes.Unavailable {
		t.Errorf("client with a certificate from another CA: %v, want Unavailable", code)
	}

	base := []string{"check", "--addr", p.GRPCAddr, "--key", "cli", "--limit", "5/1h", "--tls-ca", k.caFile}
	if out, errOut, code := runCLI(t, append(base, "--tls-client-cert", k.clientCert, "--tls-client-key", k.clientKey)...); code != 0 {
		t.Errorf("floodgate check with a client certificate: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, append(base, "--tls-client-cert", k.otherCert, "--tls-client-key", k.otherKey)...); code != 1 {
		t.Errorf("floodgate check with another CA's certificate: exit %d, want 1\n%s%s", code, out, errOut)
	}
}

// TestSecurityTokens: with --auth-token-file, a missing or unknown bearer
// token is Unauthenticated, a valid one is served, Reset needs an admin
// token (PermissionDenied otherwise), and health answers without a token.
// Over TLS, as a token would travel in production; no token in the logs.
func TestSecurityTokens(t *testing.T) {
	k := newPKI(t)
	const userToken, adminToken = "svc-token-3q2x7wE0fN2lK9", "ops-token-Zx81mPq0aa"
	tokens := writeFile(t, t.TempDir(), "tokens", []byte("# test tokens\n"+adminToken+" admin\n"+userToken+"\n"))
	p := startServe(t, "--tls-cert", k.serverCert, "--tls-key", k.serverKey, "--auth-token-file", tokens)
	conn := dialTLS(t, p.GRPCAddr, k.ca, "", "")
	c := floodgatev1.NewRateLimiterClient(conn)
	ctx := context.Background()

	for _, tc := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"no token", ctx, codes.Unauthenticated},
		{"wrong token", withToken(ctx, "not-a-token"), codes.Unauthenticated},
		{"a token's prefix", withToken(ctx, userToken[:10]), codes.Unauthenticated},
		{"not a bearer", metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+userToken), codes.Unauthenticated},
		{"user token", withToken(ctx, userToken), codes.OK},
		{"admin token", withToken(ctx, adminToken), codes.OK},
	} {
		if code := callCode(tc.ctx, conn); code != tc.want {
			t.Errorf("Check with %s: %v, want %v", tc.name, code, tc.want)
		}
	}

	reset := func(ctx context.Context) codes.Code {
		_, err := c.Reset(ctx, &floodgatev1.ResetRequest{Key: "sec", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET})
		return status.Code(err)
	}
	if code := reset(ctx); code != codes.Unauthenticated {
		t.Errorf("Reset without a token: %v, want Unauthenticated", code)
	}
	if code := reset(withToken(ctx, userToken)); code != codes.PermissionDenied {
		t.Errorf("Reset with a non-admin token: %v, want PermissionDenied", code)
	}
	if code := reset(withToken(ctx, adminToken)); code != codes.OK {
		t.Errorf("Reset with an admin token: %v, want OK", code)
	}
	// The reset took effect: the key is full again.
	resp, err := c.Check(withToken(ctx, userToken), inlineCheck("sec"))
	if err != nil || resp.Remaining != 99 {
		t.Errorf("Check after the reset: %v %v, want remaining 99", resp, err)
	}

	for _, svc := range []string{"", "floodgate.v1.RateLimiter", "floodgate.store"} {
		hr, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q without a token: %v %v, want SERVING", svc, hr, err)
		}
	}

	// floodgate check carries the token.
	base := []string{"check", "--addr", p.GRPCAddr, "--key", "cli", "--limit", "5/1h", "--tls-ca", k.caFile}
	if out, errOut, code := runCLI(t, append(base, "--token", userToken)...); code != 0 {
		t.Errorf("floodgate check --token: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, append(base, "--token", "wrong")...); code != 1 || !strings.Contains(strings.ToLower(errOut), "unauthenticated") {
		t.Errorf("floodgate check with a wrong token: exit %d, want 1 naming Unauthenticated\n%s", code, errOut)
	}

	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{userToken, adminToken, userToken[:10]} {
		if p.logs.Contains(tok) {
			t.Errorf("a token appears in the logs:\n%s", p.logs)
		}
	}
}

// TestSecurityRefunds: with --auth-token-file, an Envoy
// refund (is_negative_hits) from a token without the refund or admin role
// gives nothing back and is decided as 0 hits (never an error answer,
// which Envoy would let through), one from a refund token is served; with
// --envoy-refunds=false every refund is decided so. A settlement below its
// reservation passes the same rule: PermissionDenied without the role.
func TestSecurityRefunds(t *testing.T) {
	const plain, refunder = "svc-token-0123456789", "envoy-token-9876543210"
	tokens := writeFile(t, t.TempDir(), "tokens", []byte(plain+"\n"+refunder+" refund\n"))
	refund := func(rls rlsv3.RateLimitServiceClient, token string) (*rlsv3.RateLimitResponse, error) {
		d := rlsDesc("remote_address", "10.7.7.7")
		d.IsNegativeHits = true
		return rls.ShouldRateLimit(withToken(context.Background(), token), &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
	}
	charge := func(rls rlsv3.RateLimitServiceClient, token string) *rlsv3.RateLimitResponse {
		r, err := rls.ShouldRateLimit(withToken(context.Background(), token), &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: repeat(1, rlsDesc("remote_address", "10.7.7.7"))})
		if err != nil {
			t.Fatalf("charge: %v", err)
		}
		return r
	}

	p := startServe(t, "--config", writeRules(t, envoyRules), "--auth-token-file", tokens)
	rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))
	for range 3 { // the 3 an hour spent
		charge(rls, plain)
	}
	if r, err := refund(rls, plain); err != nil || rlsCodes(r) != "OVER_LIMIT:OVER_LIMIT" {
		t.Errorf("refund with a plain token: %v %v, want OVER_LIMIT (decided as 0 hits), no error", r, err)
	}
	if got := rlsCodes(charge(rls, plain)); got != "OVER_LIMIT:OVER_LIMIT" {
		t.Errorf("after the refused refund: %s, want OVER_LIMIT (nothing given back)", got)
	}
	if r, err := refund(rls, refunder); err != nil || r.Statuses[0].LimitRemaining != 1 {
		t.Errorf("refund with a refund token: %v %v, want OK with 1 remaining", r, err)
	}

	settle := func(token string) error {
		_, err := floodgatev1.NewRateLimiterClient(p.Conn(t)).Settle(withToken(context.Background(), token), &floodgatev1.SettleRequest{
			Key: "s", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Reserved: 1000000, Actual: 0, IdempotencyKey: "x-" + token,
			Source: &floodgatev1.SettleRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1, Period: durationpb.New(time.Hour)}}})
		return err
	}
	if err := settle(plain); status.Code(err) != codes.PermissionDenied {
		t.Errorf("settle refund with a plain token: %v, want PermissionDenied", err)
	}
	if err := settle(refunder); err != nil {
		t.Errorf("settle refund with a refund token: %v", err)
	}

	off := startServe(t, "--config", writeRules(t, envoyRules), "--auth-token-file", tokens, "--envoy-refunds=false")
	offRLS := rlsv3.NewRateLimitServiceClient(off.Conn(t))
	for range 3 {
		charge(offRLS, plain)
	}
	if r, err := refund(offRLS, refunder); err != nil || rlsCodes(r) != "OVER_LIMIT:OVER_LIMIT" {
		t.Errorf("--envoy-refunds=false, refund with a refund token: %v %v, want OVER_LIMIT (decided as 0 hits), no error", r, err)
	}
}
