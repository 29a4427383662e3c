package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEdgeWorkerInWorkersRuntime starts examples/edge-worker with `wrangler
// dev` (the Workers runtime, workerd, from the npm registry through the
// example's package-lock.json) in front of this floodgate binary and a
// small origin, and sends login attempts until the sixth is a 429; an API
// call reaches the origin with floodgate's headers. Without Node.js and
// npm it is skipped, unless CI is set: then it fails.
func TestEdgeWorkerInWorkersRuntime(t *testing.T) {
	node, major, npm, _, err := findNode()
	if err == nil && major < 20 {
		err = fmt.Errorf("node is %d, and wrangler needs 20.3 or later", major)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and %v: install Node.js 20 or later and npm (scripts/ensure-test-deps.sh installs nodejs and npm)", err)
		}
		t.Skipf("skipping the Worker in the Workers runtime: %v", err)
	}
	dir, err := filepath.Abs("../examples/edge-worker")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	npmCI(ctx, t, npm, dir)

	p := startServe(t)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "origin saw %s %s", r.Method, r.URL.RequestURI())
	}))
	defer origin.Close()
	// A timeout far above a decision's time on a busy test machine: the
	// login route fails closed.
	base := startWrangler(ctx, t, node, dir, "FLOODGATE_URL:http://"+p.HTTPAddr, "ORIGIN_URL:"+origin.URL, "FLOODGATE_TIMEOUT_MS:5000")

	send := func(method, path string, headers map[string]string) httpAnswer {
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		return do(t, req)
	}
	var statuses []int
	var last httpAnswer
	for i := 0; i < 10 && (len(statuses) == 0 || statuses[len(statuses)-1] != 429); i++ {
		last = send(http.MethodPost, "/login", map[string]string{"CF-Connecting-IP": "198.51.100.5"})
		statuses = append(statuses, last.status)
	}
	if fmt.Sprint(statuses) != "[200 200 200 200 200 429]" {
		t.Fatalf("logins answered %v, want five 200s, then 429", statuses)
	}
	if last.header.Get("Retry-After") == "" || last.header.Get("RateLimit-Policy") != `"inline";q=5;w=900` || !strings.Contains(string(last.body), `"rate_limit_exceeded"`) {
		t.Errorf("the 429: %v %s", last.header, last.body)
	}
	api := send(http.MethodGet, "/api/orders?page=2", map[string]string{"X-API-Key": "k-1"})
	if api.status != 200 || string(api.body) != "origin saw GET /api/orders?page=2" || api.header.Get("X-RateLimit-Remaining") != "19" {
		t.Errorf("an API call: %d %v %s, want the origin's answer with 19 remaining", api.status, api.header, api.body)
	}
}

// startWrangler runs `wrangler dev` in dir on a free loopback port with
// vars (NAME:VALUE) and returns its URL once it is ready. The process
// group it starts is ended when the test ends.
func startWrangler(ctx context.Context, t *testing.T, node, dir string, vars ...string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	args := []string{filepath.Join("node_modules", "wrangler", "bin", "wrangler.js"), "dev", "--ip", "127.0.0.1", "--port", fmt.Sprint(port)}
	for _, v := range vars {
		args = append(args, "--var", v)
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	// No telemetry, no prompts, wrangler's own files in the test's folder.
	cmd.Env = append(os.Environ(), "WRANGLER_SEND_METRICS=false", "CI=true", "XDG_CONFIG_HOME="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	ready := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			logs.add(sc.Text())
			if !signalled && strings.Contains(sc.Text(), "Ready on") {
				close(ready)
				signalled = true
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // wrangler, esbuild and workerd: the group it leads
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("wrangler dev:\n%s", logs)
		}
	})
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("wrangler dev exited before it was ready:\n%s", logs)
	case <-time.After(90 * time.Second):
		t.Fatalf("wrangler dev was not ready in 90s:\n%s", logs)
	case <-ctx.Done():
		t.Fatalf("wrangler dev: %v:\n%s", ctx.Err(), logs)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}
