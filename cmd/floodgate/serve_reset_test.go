package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/giveback"
	"github.com/floodgate/floodgate/internal/testkit/testpki"
	"github.com/floodgate/floodgate/server"
)

// TestResetRefusal: without tokens, Reset is served only on a port bound
// to loopback; with tokens, everywhere (the admin token decides).
func TestResetRefusal(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		tokens  bool
		refused bool
	}{
		{"127.0.0.1:8080", false, false}, {"127.0.0.2:8080", false, false}, {"[::1]:8080", false, false}, {"localhost:8080", false, false},
		{":8080", false, true}, {"0.0.0.0:8080", false, true}, {"[::]:8080", false, true}, {"10.0.0.5:8080", false, true},
		{"192.168.1.9:0", false, true}, {"example.com:8080", false, true}, {"localhost.example.com:1", false, true}, {"no-port", false, true}, {"", false, true},
		{":8080", true, false}, {"0.0.0.0:8081", true, false}, {"127.0.0.1:8080", true, false},
	} {
		why := giveback.PortRefusal(tc.addr, tc.tokens)
		if (why != "") != tc.refused {
			t.Errorf("PortRefusal(%q, tokens %v) = %q, want refused %v", tc.addr, tc.tokens, why, tc.refused)
		}
		if why != "" && (!strings.Contains(why, "--auth-token-file") || !strings.Contains(why, tc.addr)) {
			t.Errorf("PortRefusal(%q): %q does not name the port and the fix", tc.addr, why)
		}
	}
}

// serveFlagsFor parses serve's flags from args.
func serveFlagsFor(t *testing.T, args ...string) serveFlags {
	t.Helper()
	var f serveFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if err := parseFlags(fs, args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestHTTPResetRefusedBeyondLoopback: the HTTP/JSON API of a server whose
// --http-addr is beyond loopback, without tokens, serves decisions but
// answers Reset 403 PermissionDenied naming the fix; on loopback it
// resets. (The test serves the handler on loopback; the refusal follows
// the flag.)
func TestHTTPResetRefusedBeyondLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr      string
		wantReset int
	}{{"0.0.0.0:8080", http.StatusForbidden}, {":8080", http.StatusForbidden}, {"127.0.0.1:8080", http.StatusOK}} {
		f := serveFlagsFor(t, "--http-addr", tc.addr)
		st, _, err := serveEnv{f: &f, log: slog.Default()}.buildStore(context.Background(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		reg, _ := newMetrics()
		srv := httptest.NewServer(serveEnv{f: &f, reg: reg}.httpAPI(st, decisionAPIs{settings: server.Settings{Logger: slog.New(slog.DiscardHandler)}}, grpcPipeline{}))
		post := func(path, body string) (int, string) {
			resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		check := `{"key": "k", "algorithm": "ALGORITHM_FIXED_WINDOW", "limit": {"requests": 1, "period": "3600s"}}`
		if code, body := post("/v1/check", check); code != http.StatusOK || !strings.Contains(body, `"allowed": true`) && !strings.Contains(body, `"allowed":true`) {
			t.Errorf("%s: check: %d %s", tc.addr, code, body)
		}
		code, body := post("/v1/reset", `{"key": "k"}`)
		if code != tc.wantReset {
			t.Errorf("%s: reset: %d %s, want %d", tc.addr, code, body, tc.wantReset)
		}
		if tc.wantReset == http.StatusForbidden && (!strings.Contains(body, "--auth-token-file") || !strings.Contains(body, "PERMISSION_DENIED")) {
			t.Errorf("%s: reset refusal %q does not name the fix", tc.addr, body)
		}
		// Refused, the key is not forgotten: still denied.
		wantAllowed := tc.wantReset == http.StatusOK
		if _, body := post("/v1/check", check); strings.Contains(body, "true") != wantAllowed {
			t.Errorf("%s: check after reset: %s, want allowed %v", tc.addr, body, wantAllowed)
		}
		// A settlement below its reservation gives units back: the same
		// rule refuses it where Reset is refused, and the key stays spent.
		if !wantAllowed {
			settle := `{"key": "k", "algorithm": "ALGORITHM_FIXED_WINDOW", "limit": {"requests": 1, "period": "3600s"}, "reserved": "1000000", "actual": "0", "idempotencyKey": "x1"}`
			if code, body := post("/v1/settle", settle); code != http.StatusForbidden || !strings.Contains(body, "--auth-token-file") {
				t.Errorf("%s: settle refund: %d %s, want 403 naming the fix", tc.addr, code, body)
			}
			if _, body := post("/v1/check", check); strings.Contains(body, "true") {
				t.Errorf("%s: check after the refused refund: %s, want denied", tc.addr, body)
			}
		}
		srv.Close()
		st.Close()
	}
}

// TestGRPCResetRefusedBeyondLoopback: the gRPC pipeline of a server whose
// --grpc-addr is beyond loopback, without tokens or mTLS, carries the
// port's refusal into every call, so the give-back rule refuses Reset and
// refunds there; on loopback it does not. With client certificates
// required (--tls-client-ca) every peer is known, and nothing is refused
// without tokens; TLS without client certificates is refused.
func TestGRPCResetRefusedBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "floodgate test CA")
	cert, key, _ := ca.Issue(t, "127.0.0.1", true)
	mtls := []string{"--tls-cert", testpki.WriteFile(t, dir, "cert.pem", cert), "--tls-key", testpki.WriteFile(t, dir, "key.pem", key),
		"--tls-client-ca", testpki.WriteFile(t, dir, "ca.pem", ca.PEM)}
	for _, tc := range []struct {
		args    []string
		refused bool
	}{
		{append([]string{"--grpc-addr", "0.0.0.0:8081"}, mtls...), false},
		{[]string{"--grpc-addr", "0.0.0.0:8081", "--tls-cert", mtls[1], "--tls-key", mtls[3]}, true},
		{[]string{"--grpc-addr", "0.0.0.0:8081"}, true},
		{[]string{"--grpc-addr", ":8081"}, true},
		{[]string{"--grpc-addr", "127.0.0.1:8081"}, false},
		{nil, false}, // the default, loopback
	} {
		f := serveFlagsFor(t, tc.args...)
		_, metrics := newMetrics()
		p, err := serveEnv{f: &f, metrics: metrics, log: slog.New(slog.DiscardHandler)}.buildGRPCPipeline(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, method := range []string{floodgatev1.RateLimiter_Reset_FullMethodName, floodgatev1.RateLimiter_Check_FullMethodName, floodgatev1.RateLimiter_Settle_FullMethodName} {
			for _, kind := range []giveback.Kind{giveback.Reset, giveback.Refund} {
				_, err := chainUnary(p.unary, method, func(ctx context.Context, _ any) (any, error) { return nil, giveback.Allowed(ctx, kind) })
				if tc.refused != errors.Is(err, giveback.ErrRefused) {
					t.Errorf("%v: %s: give-back %v: %v; want refused %v", tc.args, method, kind, err, tc.refused)
				}
				if tc.refused && !strings.Contains(err.Error(), "--auth-token-file") {
					t.Errorf("%v: refusal %q does not name the fix", tc.args, err)
				}
			}
		}
		p.close()
	}
}

// chainUnary runs a call to method through interceptors, in order, to h.
func chainUnary(interceptors []grpc.UnaryServerInterceptor, method string, h grpc.UnaryHandler) (any, error) {
	info := &grpc.UnaryServerInfo{FullMethod: method}
	next := h
	for i := len(interceptors) - 1; i >= 0; i-- {
		ic, inner := interceptors[i], next
		next = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, inner) }
	}
	return next(context.Background(), nil)
}
