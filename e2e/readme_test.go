package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// grpcurl builds the pinned grpcurl (tools/grpcurl/go.mod) once.
var grpcurl = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "floodgate-grpcurl-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "grpcurl")
	cmd := exec.Command("go", "build", "-modfile=tools/grpcurl/go.mod", "-o", bin, "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &exec.Error{Name: "go build grpcurl", Err: errorString(string(out) + err.Error())}
	}
	return bin, nil
})

type errorString string

func (e errorString) Error() string { return string(e) }

// readmeBlocks returns the ```sh blocks of the README section that starts
// with heading.
func readmeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README has no %q section", heading)
	}
	text = text[i+len(heading)+2:]
	if j := strings.Index(text, "\n## "); j >= 0 {
		text = text[:j]
	}
	var blocks []string
	for {
		s := strings.Index(text, "```sh\n")
		if s < 0 {
			return blocks
		}
		text = text[s+6:]
		e := strings.Index(text, "```")
		blocks = append(blocks, text[:e])
		text = text[e+3:]
	}
}

// TestReadmeTryIt runs the README's "Try it" commands, as written, against
// the binary: grpcurl (the pinned version), floodgate check, curl.
func TestReadmeTryIt(t *testing.T) {
	gc, err := grpcurl()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README's commands: apt-get install curl")
	}
	blocks := readmeBlocks(t, "## Try it")
	if len(blocks) != 2 {
		t.Fatalf("README's Try it section has %d sh blocks, want 2 (the Check, then the rest)", len(blocks))
	}
	p := startServe(t)
	run := func(script string) string {
		t.Helper()
		script = strings.ReplaceAll(script, "127.0.0.1:8081", p.GRPCAddr)
		script = strings.ReplaceAll(script, "127.0.0.1:8080", p.HTTPAddr)
		script = strings.ReplaceAll(script, "go run ./cmd/floodgate check", binary+" check --addr "+p.GRPCAddr)
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(gc)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README commands failed: %v\n%s\n--- output:\n%s", err, script, out)
		}
		return string(out)
	}
	// The Check, four times: remaining 2, 1, 0, then denied with a wait.
	for i, want := range []string{`"remaining": "2"`, `"remaining": "1"`, `"allowed": true`, `"retryAfter": "`} {
		out := run(blocks[0])
		if !strings.Contains(out, want) {
			t.Fatalf("call %d: output lacks %s:\n%s", i+1, want, out)
		}
		if i == 3 && strings.Contains(out, `"allowed"`) {
			t.Fatalf("call 4 was allowed:\n%s", out)
		}
	}
	out := run(blocks[1])
	for _, want := range []string{
		"floodgate.v1.RateLimiter", "envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
		`"results"`, // CheckBatch
		"ok",        // /healthz
		`floodgate_decisions_total{`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("README commands' output lacks %q:\n%s", want, out)
		}
	}
}
