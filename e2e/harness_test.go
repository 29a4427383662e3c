// Package e2e tests the built floodgate binary as users run it: real
// processes, real TCP, real redis-server processes started by the tests.
package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// binary is the floodgate binary built once for the package.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here runs the built binary (most with a redis-server).
		fmt.Println("e2e: skipped under -short: the tests build and run the floodgate binary (run without -short, as make test does)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "floodgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "floodgate")
	build := exec.Command("go", "build", "-race", "-o", binary, "../cmd/floodgate")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building floodgate:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running `floodgate serve`.
type proc struct {
	t        testing.TB
	cmd      *exec.Cmd
	GRPCAddr string
	HTTPAddr string
	logs     *logBuffer
	done     chan error
}

// logBuffer keeps the process' log lines for assertions and failure output.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
}

// Contains reports whether a log line contains s.
func (b *logBuffer) Contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// startServe runs `floodgate serve` on free loopback ports with args added
// and waits until it logs that it serves. It is stopped (SIGTERM) when the
// test ends.
func startServe(t testing.TB, args ...string) *proc {
	t.Helper()
	return startBinary(t, binary, args...)
}

// startBinary is startServe with another build of floodgate.
func startBinary(t testing.TB, bin string, args ...string) *proc {
	t.Helper()
	full := append([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json"}, args...)
	cmd := exec.Command(bin, full...)
	cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1 atexit_sleep_ms=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, logs: &logBuffer{}, done: make(chan error, 1)}
	ready := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logs.add(line)
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "serving" {
				ready <- rec
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.done <- cmd.Wait()
	}()
	select {
	case rec := <-ready:
		p.GRPCAddr, _ = rec["grpc"].(string)
		p.HTTPAddr, _ = rec["http"].(string)
	case err := <-p.done:
		t.Fatalf("floodgate exited before serving: %v\n%s", err, p.logs)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("floodgate did not start in 30s\n%s", p.logs)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}

// Stop sends SIGTERM and waits for a clean exit; it returns the exit error.
func (p *proc) Stop() error {
	if p.cmd.ProcessState != nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			p.t.Errorf("floodgate exited with %v\n%s", err, p.logs)
		}
		return err
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		p.t.Errorf("floodgate did not stop within 20s of SIGTERM\n%s", p.logs)
		return fmt.Errorf("timeout")
	}
}

// Conn dials the process' gRPC port with opts added.
func (p *proc) Conn(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(p.GRPCAddr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Client is a floodgate.v1 client on the process.
func (p *proc) Client(t testing.TB) floodgatev1.RateLimiterClient {
	return floodgatev1.NewRateLimiterClient(p.Conn(t))
}

// runCLI runs the binary with args and returns its output and exit code.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// cachedBinary returns the file that build writes for the inputs named by
// key, keeping it in the user's cache (os.UserCacheDir()/floodgate-e2e/bin)
// across runs: a binary built from pinned inputs (a tool's go.sum, a
// release's commit) is the same every run, so it is built once a machine
// and Go version. The cache keeps the newest build of each name. Without a
// user cache dir, build writes into dir.
func cachedBinary(name, key, dir string, build func(out string) error) (string, error) {
	gover, err := exec.Command("go", "env", "GOVERSION", "GOOS", "GOARCH").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	sum := sha256.Sum256([]byte(key + "\n" + string(gover)))
	base, err := os.UserCacheDir()
	if err != nil {
		out := filepath.Join(dir, name)
		return out, build(out)
	}
	cacheDir := filepath.Join(base, "floodgate-e2e", "bin")
	out := filepath.Join(cacheDir, name+"-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cacheDir, ".tmp-"+name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := build(filepath.Join(tmp, name)); err != nil {
		return "", err
	}
	// A rename: a concurrent run finds the whole binary or none.
	if err := os.Rename(filepath.Join(tmp, name), out); err != nil {
		return "", err
	}
	others, _ := filepath.Glob(filepath.Join(cacheDir, name+"-*"))
	for _, o := range others {
		if o != out {
			os.Remove(o)
		}
	}
	return out, nil
}
