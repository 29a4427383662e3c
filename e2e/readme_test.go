package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/floodgate/floodgate/e2e/docblocks"
)

// grpcurl builds the pinned grpcurl (tools/grpcurl/go.mod), once a
// machine and Go version (cachedBinary, keyed by that go.mod and go.sum).
var grpcurl = sync.OnceValues(func() (string, error) {
	var key strings.Builder
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join("..", "tools", "grpcurl", f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&key, "%s %d\n%s", f, len(b), b)
	}
	return cachedBinary("grpcurl", key.String(), filepath.Dir(binary), func(out string) error {
		cmd := exec.Command("go", "build", "-modfile=tools/grpcurl/go.mod", "-trimpath", "-o", out, "github.com/fullstorydev/grpcurl/cmd/grpcurl")
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			return &exec.Error{Name: "go build grpcurl", Err: errorString(string(b) + err.Error())}
		}
		return nil
	})
})

type errorString string

func (e errorString) Error() string { return string(e) }

// readmeBlocks returns the shell blocks of the README section that starts
// with heading.
func readmeBlocks(t *testing.T, heading string) []docblocks.Block {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := docblocks.Extract("README.md", string(b))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README has no %q section", heading)
	}
	first := strings.Count(text[:i], "\n") + 2 // the heading's line
	last := first + strings.Count(text[i+1:], "\n")
	if j := strings.Index(text[i+1:], "\n## "); j >= 0 {
		last = first + strings.Count(text[i+1:i+1+j], "\n")
	}
	var in []docblocks.Block
	for _, b := range blocks {
		if b.Line > first && b.Line < last {
			in = append(in, b)
		}
	}
	return in
}

// TestReadmeTryIt runs the README's "Try it" blocks in order, as written,
// against a server started as `make run` starts it: the first decision
// with curl, then bin/floodgate check on the same count, then grpcurl (the
// pinned version), and checks what each answers beyond the output shown.
func TestReadmeTryIt(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README's commands: apt-get install curl")
	}
	blocks := readmeBlocks(t, "## Try it")
	if len(blocks) != 6 {
		t.Fatalf("README's Try it section has %d shell blocks, want 6 (floodgate on PATH, make run, curl, floodgate check, grpcurl, the rest)", len(blocks))
	}
	if got := strings.TrimSpace(blocks[0].Body); got != `export PATH="$PWD/bin:$PATH"` {
		t.Fatalf("Try it starts with %q, want the line that puts bin/floodgate on PATH", got)
	}
	blocks = blocks[1:] // the harness runs every block with bin/ on PATH
	if strings.TrimSpace(blocks[0].Body) != "make run" || blocks[0].NotRun == "" {
		t.Fatalf("Try it starts with %q (marked %q), want make run, marked as the server the test starts", blocks[0].Body, blocks[0].NotRun)
	}
	if !strings.HasPrefix(blocks[1].Body, "$ curl ") || !strings.Contains(blocks[1].Body, "127.0.0.1:8080/v1/check") {
		t.Fatalf("Try it's first decision is not curl on the HTTP door:\n%s", blocks[1].Body)
	}
	if !strings.HasPrefix(blocks[2].Body, "$ bin/floodgate check ") {
		t.Fatalf("Try it's second block is not bin/floodgate check:\n%s", blocks[2].Body)
	}
	if !strings.HasPrefix(blocks[3].Body, "$ grpcurl ") {
		t.Fatalf("Try it's third block is not grpcurl:\n%s", blocks[3].Body)
	}
	h := newDocHarness(t, false)
	var outs []string
	for _, b := range blocks[1:] {
		if b.NotRun != "" {
			t.Fatalf("%s is marked not run (%s): Try it runs as written", b, b.NotRun)
		}
		o, err := h.runBlock(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		outs = append(outs, o...)
	}
	if len(outs) != 5 {
		t.Fatalf("Try it ran %d commands' blocks, want 5 (curl, check, grpcurl Check, grpcurl list, the rest)", len(outs))
	}
	for i, want := range [][]string{
		{`"allowed":true`, `"remaining":"2"`},                                 // curl: the first of 3
		{"1  yes      1", "2  yes      0", "3  no       0", "2 of 3 allowed"}, // the same count over gRPC
		{`"retryAfter": "`}, // grpcurl's Check: denied
		{"floodgate.v1.RateLimiter", "envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"},
		{`"results"`, `"allowed": true`, "ok", `floodgate_decisions_total{`}, // CheckBatch, Peek, /healthz, /metrics
	} {
		for _, w := range want {
			if !strings.Contains(outs[i], w) {
				t.Errorf("Try it, command block %d: output lacks %q:\n%s", i+1, w, outs[i])
			}
		}
	}
	if strings.Contains(outs[2], `"allowed"`) {
		t.Errorf("grpcurl's Check after the three was allowed:\n%s", outs[2])
	}
}
