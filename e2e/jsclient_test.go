package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJSClient runs the JavaScript package's tests (clients/js, `node
// --test`) against this floodgate binary: the fetch client (under Node,
// Bun and Deno), the Express middleware in a real Express app, Check over
// @grpc/grpc-js with the minimum protobufjs and @grpc/proto-loader, and
// `npm pack` installed in a fresh project. Its devDependencies come from the npm registry (`npm
// ci`, when node_modules is missing or older than package-lock.json).
// Without Node.js 18 or later and npm it is skipped, unless CI is set:
// then it fails.
func TestJSClient(t *testing.T) {
	node, _, npm, _, err := findNode()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and %v: install Node.js 18 or later and npm (scripts/ensure-test-deps.sh installs nodejs and npm)", err)
		}
		t.Skipf("skipping the JavaScript package's tests: %v", err)
	}
	dir, err := filepath.Abs("../clients/js")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	npmCI(ctx, t, npm, dir)

	p := startServe(t)
	tests, err := filepath.Glob(filepath.Join(dir, "test", "*.test.js"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no tests in clients/js/test: %v", err)
	}
	cmd := exec.CommandContext(ctx, node, append([]string{"--test"}, tests...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FLOODGATE_URL=http://"+p.HTTPAddr, "FLOODGATE_GRPC_ADDR="+p.GRPCAddr)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test in clients/js:\n%s", out)
	if err != nil {
		t.Fatalf("node --test in clients/js: %v", err)
	}
	if !bytes.Contains(out, []byte("# pass ")) || bytes.Contains(out, []byte("# pass 0\n")) || !bytes.Contains(out, []byte("# fail 0\n")) {
		t.Fatalf("node --test passed no test, or failed one")
	}
}

// npmCI installs dir's package-lock.json with `npm ci` unless
// node_modules already holds that very lockfile's install (a stamp with
// its SHA-256, written after a successful install).
func npmCI(ctx context.Context, t *testing.T, npm, dir string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".floodgate-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(got)) == want {
		return
	}
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("npm ci in %s:\n%s", dir, out)
	if err != nil {
		t.Fatalf("npm ci in %s: %v", dir, err)
	}
	if err := os.WriteFile(stamp, []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
