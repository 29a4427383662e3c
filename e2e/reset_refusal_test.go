package e2e

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// loopbackName is a host name other than "localhost" that resolves only
// to loopback addresses (the host's own name, as /etc/hosts often maps
// it), so that a port bound to it is reachable from this host only while
// floodgate cannot tell it from a name beyond loopback; the test skips
// when there is none.
func loopbackName(t *testing.T) string {
	t.Helper()
	name, err := os.Hostname()
	if err != nil || name == "" || name == "localhost" {
		t.Skipf("no host name other than localhost (%q, %v)", name, err)
	}
	ips, err := net.LookupIP(name)
	if err != nil || len(ips) == 0 {
		t.Skipf("host name %q does not resolve: %v", name, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			t.Skipf("host name %q resolves beyond loopback (%v): not bound here", name, ip)
		}
	}
	return name
}

// TestResetRefusedBeyondLoopback: a binary with no --auth-token-file whose
// ports are bound to anything but a loopback address or "localhost"
// serves decisions on both doors but refuses Reset (gRPC
// PermissionDenied, HTTP 403), naming the fix, and says so at start;
// bound to 127.0.0.1 it resets.
func TestResetRefusedBeyondLoopback(t *testing.T) {
	host := loopbackName(t)
	p := startServe(t, "--grpc-addr", host+":0", "--http-addr", host+":0")
	c := p.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := c.Check(ctx, inlineTB("k", 5, 1)); err != nil || !r.Allowed {
		t.Fatalf("Check: %v, %v; want a decision", r, err)
	}
	_, err := c.Reset(ctx, &floodgatev1.ResetRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "--auth-token-file") {
		t.Errorf("gRPC Reset on %s: %v, want PermissionDenied naming --auth-token-file", host, err)
	}
	if a := post(t, p, "/v1/check", "", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":5,"period":"60s"}}`); a.status != 200 {
		t.Errorf("HTTP check: %d %s, want 200", a.status, a.body)
	}
	a := post(t, p, "/v1/reset", "", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET"}`)
	if e := errorOf(t, a); a.status != 403 || e.Code != "PERMISSION_DENIED" || !strings.Contains(e.Message, "--auth-token-file") {
		t.Errorf("HTTP reset on %s: %d %s, want 403 PERMISSION_DENIED naming --auth-token-file", host, a.status, a.body)
	}
	for _, door := range []string{"gRPC port", "HTTP/JSON API"} {
		if !p.logs.Contains("Reset is refused on the " + door) {
			t.Errorf("no warning at start for the %s\n%s", door, p.logs)
		}
	}

	local := startServe(t)
	if _, err := local.Client(t).Reset(ctx, &floodgatev1.ResetRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET}); err != nil {
		t.Errorf("gRPC Reset on 127.0.0.1: %v, want it served", err)
	}
	if a := post(t, local, "/v1/reset", "", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET"}`); a.status != 200 {
		t.Errorf("HTTP reset on 127.0.0.1: %d %s, want 200", a.status, a.body)
	}
}
