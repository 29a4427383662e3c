package e2e

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// TestSighupReloads: SIGHUP reloads the rules, the TLS certificate and
// the tokens and the server keeps serving; a broken rules file on SIGHUP
// is reported and the previous rules keep serving. SIGHUP used to end the
// process (Go's default for it: exit status 129).
func TestSighupReloads(t *testing.T) {
	k := newPKI(t)
	const token = "svc-token-hup-4Rt"
	tokens := writeFile(t, t.TempDir(), "tokens", []byte(token+"\n"))
	cfg := writeRules(t, "policies:\n  p: {requests: 3, period: 1h}\n")
	p := startServe(t, "--config", cfg, "--tls-cert", k.serverCert, "--tls-key", k.serverKey, "--auth-token-file", tokens)
	c := floodgatev1.NewRateLimiterClient(dialTLS(t, p.GRPCAddr, k.ca, "", ""))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	limitOf := func() int64 {
		t.Helper()
		resp, err := c.Check(ctx, policyCheck("p", "k"))
		if err != nil {
			t.Fatalf("Check after SIGHUP: %v\n%s", err, p.logs)
		}
		return resp.Limit
	}
	hup := func(n int) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the SIGHUP logged", func() bool { return logLines(p, "SIGHUP: files reloaded") >= n })
	}
	if got := limitOf(); got != 3 {
		t.Fatalf("limit %d, want 3", got)
	}

	for i := 1; i <= 3; i++ {
		hup(i)
	}
	if !p.logs.Contains(`"reloaded":["rules","tls","tokens"]`) {
		t.Errorf("the SIGHUP line does not name rules, tls and tokens:\n%s", p.logs)
	}
	if got := limitOf(); got != 3 {
		t.Errorf("after SIGHUP: limit %d, want 3", got)
	}

	// A broken file: reported, the previous rules keep serving.
	if err := os.WriteFile(cfg, []byte("policies:\n  p: {requests: nope}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hup(4)
	if !p.logs.Contains(`"failed":["rules"]`) {
		t.Errorf("a broken rules file on SIGHUP: not reported as failed:\n%s", p.logs)
	}
	if got := limitOf(); got != 3 {
		t.Errorf("after a broken reload: limit %d, want the previous 3", got)
	}
	if err := os.WriteFile(cfg, []byte("policies:\n  p: {requests: 7, period: 1h}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hup(5)
	waitFor(t, 5*time.Second, "the new rules", func() bool { return limitOf() == 7 })
	if err := p.Stop(); err != nil {
		t.Errorf("SIGTERM after SIGHUPs: %v", err)
	}
	if strings.Contains(p.logs.String(), token) {
		t.Error("the log shows a token")
	}
}
