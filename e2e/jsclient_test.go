package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
// ci`, unless node_modules or the user's cache holds the install of the
// same lockfile: npmCI).
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

// npmCI installs dir's package.json and package-lock.json with `npm ci`,
// unless node_modules already holds that very install (a stamp with the
// two files' SHA-256, written after a successful install) or the user's
// cache does: then the cached install is copied in. A successful install
// is copied to the cache (os.UserCacheDir()/floodgate-e2e/npm, one install
// per folder name, keyed by the stamp), so that a clean clone does not
// install the same lockfile again. Copies keep symbolic links as they are:
// a relative link to a file: dependency points into the clone it is in.
func npmCI(ctx context.Context, t *testing.T, npm, dir string) {
	t.Helper()
	h := sha256.New()
	for _, name := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	want := hex.EncodeToString(h.Sum(nil))
	const stampName = ".floodgate-lock-sha256"
	stamped := func(modules string) bool {
		got, err := os.ReadFile(filepath.Join(modules, stampName))
		return err == nil && strings.TrimSpace(string(got)) == want
	}
	modules := filepath.Join(dir, "node_modules")
	if stamped(modules) {
		return
	}
	var cached string // the cache's folder for this install; "" without a cache
	if base, err := os.UserCacheDir(); err == nil {
		cached = filepath.Join(base, "floodgate-e2e", "npm", filepath.Base(dir)+"-"+want[:16])
	}
	if cached != "" && stamped(filepath.Join(cached, "node_modules")) {
		if err := os.RemoveAll(modules); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, "cp", "-a", filepath.Join(cached, "node_modules"), modules).CombinedOutput()
		if err == nil && stamped(modules) {
			t.Logf("npm ci in %s: copied the install of the same package.json and package-lock.json from %s", dir, cached)
			return
		}
		// A copy cut short (the cache pruned meanwhile): npm ci starts afresh.
		t.Logf("copying the cached install %s to %s: %v\n%s", cached, dir, err, out)
	}
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("npm ci in %s:\n%s", dir, out)
	if err != nil {
		t.Fatalf("npm ci in %s: %v", dir, err)
	}
	if err := os.WriteFile(filepath.Join(modules, stampName), []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cached != "" {
		if err := saveCopy(ctx, modules, cached); err != nil {
			t.Logf("npm ci in %s: not cached: %v", dir, err)
		}
	}
}

// saveCopy copies the folder src to cached/<src's name> through a
// temporary folder renamed into place (a reader never sees half a copy),
// and removes the cache's other entries of the same name (cached less its
// last "-" part).
func saveCopy(ctx context.Context, src, cached string) error {
	parent, name := filepath.Dir(cached), filepath.Base(cached)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.CommandContext(ctx, "cp", "-a", src, filepath.Join(tmp, filepath.Base(src))).CombinedOutput(); err != nil {
		return fmt.Errorf("cp: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, cached); err != nil && !os.IsExist(err) {
		return err
	}
	prefix := name[:strings.LastIndex(name, "-")+1]
	others, err := filepath.Glob(filepath.Join(parent, prefix+"*"))
	if err != nil {
		return err
	}
	for _, o := range others {
		if o != cached {
			os.RemoveAll(o)
		}
	}
	return nil
}
