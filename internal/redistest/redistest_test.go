package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/internal/redistest"
)

func TestServerStartRestartStop(t *testing.T) {
	ctx := context.Background()
	s := redistest.StartServer(t, "--maxmemory", "16mb")
	c := s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.ConfigGet(ctx, "maxmemory").Result(); err != nil || got["maxmemory"] != "16777216" {
		t.Fatalf("CONFIG GET maxmemory = %v, %v; want 16777216 (extra args applied)", got, err)
	}
	if got, err := c.ConfigGet(ctx, "save").Result(); err != nil || got["save"] != "" {
		t.Fatalf("CONFIG GET save = %q, %v; want empty", got["save"], err)
	}

	port, pid := s.Port(), s.PID()
	s.Restart()
	if s.Port() != port {
		t.Fatalf("Restart moved the server from port %d to %d", port, s.Port())
	}
	if s.PID() == pid || s.PID() == 0 {
		t.Fatalf("Restart kept PID %d (now %d), want a new process", pid, s.PID())
	}
	if processAlive(pid) {
		t.Fatalf("old process %d still alive after Restart", pid)
	}
	// The old client reconnects; nothing was persisted.
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart: %v, want redis.Nil (no persistence)", err)
	}

	pid = s.PID()
	s.Stop()
	if s.PID() != 0 || processAlive(pid) {
		t.Fatalf("process %d alive after Stop", pid)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Stop")
	}
	s.Stop() // idempotent
}

func TestServersAreIndependent(t *testing.T) {
	a, b := redistest.StartServer(t), redistest.StartServer(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers share %s", a.Addr())
	}
	ctx := context.Background()
	if err := a.Client().Set(ctx, "only-a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Client().Exists(ctx, "only-a").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS on b = %d, %v; want 0", n, err)
	}
}

func TestCluster(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 0)
	if c.Len() != 3 {
		t.Fatalf("Len = %d, want 3", c.Len())
	}
	cl := c.Client()
	// Keys in many slots land on all three masters.
	for i := range 100 {
		if err := cl.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET key-%d: %v", i, err)
		}
	}
	total := int64(0)
	for i := range c.Len() {
		n, err := c.Node(i).Client().DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("node %d holds no keys; slots not spread", i)
		}
		total += n
	}
	if total != 100 {
		t.Fatalf("nodes hold %d keys, want 100", total)
	}
	for i := range c.Len() {
		info, err := c.Node(i).Client().ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("node %d CLUSTER INFO: %v %q", i, err, info)
		}
	}
	pid := c.Node(0).PID()
	c.Kill(0)
	if processAlive(pid) {
		t.Fatalf("node 0 (pid %d) alive after Kill", pid)
	}
	if err := c.Node(1).Client().Ping(ctx).Err(); err != nil {
		t.Fatalf("node 1 after killing node 0: %v", err)
	}
}

func TestClusterWithReplicas(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 1)
	if c.Len() != 6 {
		t.Fatalf("Len = %d, want 6", c.Len())
	}
	replicas := 0
	for i := range c.Len() {
		role, err := c.Node(i).Client().Do(ctx, "ROLE").Slice()
		if err != nil || len(role) == 0 {
			t.Fatalf("node %d ROLE: %v %v", i, role, err)
		}
		if role[0] == "slave" {
			replicas++
		}
	}
	if replicas != 3 {
		t.Fatalf("%d replicas, want 3", replicas)
	}
}

func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	if p.Signal(syscall.Signal(0)) != nil {
		return false
	}
	// A zombie still answers signal 0; look at its state.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || !strings.Contains(string(b), ") Z ")
}

func TestRequireFailsOnCI(t *testing.T) {
	if os.Getenv("REDISTEST_CHILD") == "1" {
		redistest.Require(t)
		t.Log("redis found")
		return
	}
	// Run this test in a child with an empty PATH and CI=true: Require must
	// fail it, never skip it.
	cmd := exec.Command(os.Args[0], "-test.run=^TestRequireFailsOnCI$", "-test.v")
	cmd.Env = append(os.Environ(), "REDISTEST_CHILD=1", "CI=true", "PATH=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--- FAIL") || !strings.Contains(string(out), "redis-server and redis-cli not on PATH") {
		t.Fatalf("child with CI=true and no redis: err %v, output:\n%s\nwant a failure naming the missing tools", err, out)
	}
	cmd = exec.Command(os.Args[0], "-test.run=^TestRequireFailsOnCI$", "-test.v")
	cmd.Env = append(os.Environ(), "REDISTEST_CHILD=1", "CI=", "PATH=/nonexistent")
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("child without CI and no redis: err %v, output:\n%s\nwant a skip", err, out)
	}
	// -short is an explicit opt-out: it skips even with CI=true, and says
	// why.
	cmd = exec.Command(os.Args[0], "-test.run=^TestRequireFailsOnCI$", "-test.v", "-test.short")
	cmd.Env = append(os.Environ(), "REDISTEST_CHILD=1", "CI=true", "PATH=/nonexistent")
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- SKIP") || !strings.Contains(string(out), "skipped under -short") {
		t.Fatalf("child with -short and CI=true: err %v, output:\n%s\nwant a skip naming -short", err, out)
	}
}

// TestCINeverRunsShort pins what makes skipping under -short safe: CI runs
// make test, and make test runs go test without -short.
func TestCINeverRunsShort(t *testing.T) {
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make test$`).Match(ci) {
		t.Errorf(".ci/run does not run `make test`:\n%s", ci)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?ms)^test:[^\n]*\n((?:\t[^\n]*\n)+)`).FindSubmatch(makefile)
	if recipe == nil {
		t.Fatal("Makefile has no test target")
	}
	if !strings.Contains(string(recipe[1]), "$(GO) test ") {
		t.Errorf("make test does not run go test:\n%s", recipe[1])
	}
	if strings.Contains(string(recipe[1]), "-short") {
		t.Errorf("make test runs with -short, so CI would skip every test that needs Redis:\n%s", recipe[1])
	}
}
