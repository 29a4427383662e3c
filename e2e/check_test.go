package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// TestServeEmbeddedWalkthrough is the README's quick start against the
// binary: three allowed, then denied with retry_after about 20s; the
// listing shows the service, health and reflection; SIGTERM stops cleanly.
func TestServeEmbeddedWalkthrough(t *testing.T) {
	t.Parallel() // its stop waits out --drain-timeout (the reflection stream is still open); other tests run meanwhile
	p := startServe(t)
	c := p.Client(t)
	ctx := context.Background()
	req := &floodgatev1.CheckRequest{
		Key: "user:1", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
		Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 3, Period: durationpb.New(60 * time.Second)}},
	}
	for i, want := range []int64{2, 1, 0} {
		resp, err := c.Check(ctx, req)
		if err != nil || !resp.Allowed || resp.Remaining != want {
			t.Fatalf("check %d: got %v %v, want allowed remaining %d", i, resp, err, want)
		}
	}
	resp, err := c.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// The real clock moved a little since the first check: a token comes
	// back every 20s, so the wait is just under 20s.
	if ra := resp.RetryAfter.AsDuration(); resp.Allowed || ra <= 15*time.Second || ra > 20*time.Second {
		t.Fatalf("4th check: got allowed=%v retry_after=%v, want denied with retry_after about 20s", resp.Allowed, ra)
	}

	// A bad request is InvalidArgument, and the server keeps serving.
	if _, err := c.Check(ctx, &floodgatev1.CheckRequest{Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty key: got %v, want InvalidArgument", err)
	}

	// Reflection lists the services grpcurl shows.
	refl, err := reflectionpb.NewServerReflectionClient(p.Conn(t)).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	lr, err := refl.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range lr.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	for _, want := range []string{"floodgate.v1.RateLimiter", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}

	hr, err := healthpb.NewHealthClient(p.Conn(t)).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: got %v %v, want SERVING", hr, err)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		res, err := http.Get("http://" + p.HTTPAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: got %d %q, want 200", path, res.StatusCode, body)
		}
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if !p.logs.Contains(`"msg":"stopped"`) {
		t.Fatalf("no clean stop in the logs:\n%s", p.logs)
	}
}

// TestServeFlagsFromEnvironment: every flag is also FLOODGATE_<FLAG>.
func TestServeFlagsFromEnvironment(t *testing.T) {
	t.Setenv("FLOODGATE_MAX_KEY_BYTES", "8")
	p := startServe(t)
	_, err := p.Client(t).Check(context.Background(), &floodgatev1.CheckRequest{
		Key: "123456789", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW,
		Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 3, Period: durationpb.New(time.Second)}},
	})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "limit of 8") {
		t.Fatalf("got %v, want InvalidArgument for a 9-byte key with FLOODGATE_MAX_KEY_BYTES=8", err)
	}
}

// TestCLIErrors: bad flags and commands exit non-zero with a message.
func TestCLIErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"serve", "--no-such-flag"}, 2, "unknown flag --no-such-flag"},
		{[]string{"serve", "--grpc-adr", "x"}, 2, "did you mean --grpc-addr?"},
		{[]string{"serve", "--failure-mode", "maybe"}, 2, "--failure-mode must be open, closed or local"},
		{[]string{"serve", "--memory-max-keys", "0"}, 2, "--memory-max-keys must be positive"},
		// Out-of-range numbers are refused, never replaced by a default.
		{[]string{"serve", "--max-key-bytes", "-1"}, 2, "--max-key-bytes must be positive, got -1"},
		{[]string{"serve", "--max-key-bytes", "0"}, 2, "--max-key-bytes must be positive, got 0"},
		{[]string{"serve", "--max-recv-msg-bytes", "-5"}, 2, "--max-recv-msg-bytes must be positive"},
		{[]string{"serve", "--redis-pipelines", "0"}, 2, "--redis-pipelines must be positive"},
		{[]string{"serve", "--deny-cache-size", "-1"}, 2, "--deny-cache-size must not be negative"},
		{[]string{"serve", "--drain-timeout", "-1s"}, 2, "--drain-timeout must be positive"},
	}
	for _, tt := range tests {
		_, stderr, code := runCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.msg) {
			t.Errorf("floodgate %v: got exit %d, stderr %q; want exit %d containing %q", tt.args, code, stderr, tt.code, tt.msg)
		}
	}
	stdout, _, code := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "floodgate ") {
		t.Errorf("version: got %q exit %d", stdout, code)
	}
	helpOut, helpErr, code := runCLI(t, "serve", "--help")
	if code != 0 || !strings.Contains(helpOut, "$FLOODGATE_GRPC_ADDR") || helpErr != "" {
		t.Errorf("serve --help: exit %d, stderr %q; want the flags with their environment variables on stdout:\n%s", code, helpErr, helpOut)
	}
}

// TestConfigValidate: `floodgate config validate` exits 0 on a good file and
// 1 with file:line:column on a bad one.
func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("domain: api\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 10}\n"), 0o644)
	os.WriteFile(bad, []byte("domain: api\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: fortnight, requests_per_unit: 10}\n"), 0o644)
	if out, stderr, code := runCLI(t, "config", "validate", good); code != 0 || !strings.HasPrefix(out, "ok") {
		t.Errorf("good config: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if _, stderr, code := runCLI(t, "config", "validate", bad); code != 1 || !strings.Contains(stderr, "bad.yaml:4:") {
		t.Errorf("bad config: exit %d, stderr %q; want exit 1 with bad.yaml:4:<col>", code, stderr)
	}
}
