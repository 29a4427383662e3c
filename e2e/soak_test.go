package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/loadgen"
	"github.com/floodgate/floodgate/internal/redistest"
)

// soakEnv names the soak's duration; without it TestSoak is skipped.
const soakEnv = "FLOODGATE_SOAK"

// Soak margins: how far above its pre-load value a resource may stay once
// the load has ended. Small absolute slack for what a quiet server
// legitimately varies by (a probe's goroutine, the scrape's own
// connection, allocator noise); a leak of one goroutine or connection per
// request, or a heap that grows with requests, exceeds them by orders of
// magnitude after a minute of load.
const (
	soakGoroutineSlack = 10
	soakFDSlack        = 4
	soakHeapSlack      = 4 << 20 // bytes, plus soakHeapRatio of the baseline
	soakHeapRatio      = 0.25
	soakSettle         = 15 * time.Second // how long the resources may take to come back
	soakWorkers        = 32
	soakKeys           = 5000 // drawn with a Zipf skew: hot keys are denied, the tail grows the key set
	soakZipf           = 1.2
	// soakRedisPool is --redis-pool-size. go-redis (v9.23) keeps a second
	// pool for pipelines, of redisPipelinePool connections by default, and
	// opens connections lazily up to both sizes: connections to Redis may
	// grow during the load up to soakRedisPool + redisPipelinePool without
	// a leak, so they are counted apart and checked against that bound.
	soakRedisPool     = 4
	redisPipelinePool = 10
)

// TestSoak runs load on both APIs against a binary on Redis for
// $FLOODGATE_SOAK (e.g. 60s; `make soak`), then checks that goroutines,
// heap in use and open file descriptors come back to within a small
// margin of their values before the load.
func TestSoak(t *testing.T) {
	env := os.Getenv(soakEnv)
	if env == "" {
		t.Skipf("the soak runs only with %s set to a duration, e.g. %s=60s (make soak)", soakEnv, soakEnv)
	}
	dur, err := time.ParseDuration(env)
	if err != nil || dur <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 60s", soakEnv, env)
	}

	r := redistest.StartServer(t)
	rules := loadgen.RLSConfig("soak", 2, algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 20, Period: time.Second})
	p := startServe(t, "--pprof", "--config", writeRules(t, rules), "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "2s",
		"--redis-pool-size", strconv.Itoa(soakRedisPool))
	pid := p.cmd.Process.Pid

	// Warm up with the soak's own shape, so pools (gRPC, go-redis) and
	// caches reach their steady size before the baseline.
	runSoakLoad(t, p, 3*time.Second)
	base := settle(t, p, r.Port(), pid, nil)
	t.Logf("before the load: %s %v", base, fdTargets(pid))

	start := time.Now()
	runSoakLoad(t, p, dur)
	t.Logf("load ran %v", time.Since(start).Round(time.Millisecond))

	after := settle(t, p, r.Port(), pid, &base)
	t.Logf("after the load: %s %v", after, fdTargets(pid))
}

// runSoakLoad runs Check and ShouldRateLimit load side by side for d, each
// on connections of its own that are closed at the end, and fails t on
// any RPC error or a run with no denies (which would be no rate limiting).
func runSoakLoad(t *testing.T, p *proc, d time.Duration) {
	t.Helper()
	type outcome struct {
		res *loadgen.Result
		err error
	}
	cfgs := []loadgen.Config{
		{API: loadgen.APICheck, Limit: algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 20, Period: time.Second}},
		{API: loadgen.APIRLS, Domain: "soak", Descriptors: 2},
	}
	results := make(chan outcome, len(cfgs))
	for _, cfg := range cfgs {
		var conns []*grpc.ClientConn
		for range 2 {
			c, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			cfg.Conns = append(cfg.Conns, c)
		}
		cfg.Concurrency, cfg.Duration, cfg.Keys, cfg.Zipf, cfg.Target = soakWorkers/2, d, soakKeys, soakZipf, p.GRPCAddr
		go func() {
			res, err := loadgen.Run(context.Background(), cfg)
			for _, c := range conns {
				c.Close()
			}
			results <- outcome{res, err}
		}()
	}
	for range cfgs {
		o := <-results
		if o.err != nil {
			t.Fatal(o.err)
		}
		res := o.res
		t.Logf("%v: %d requests (%.0f/s), %d allowed, %d denied, %d errors, p99 %v",
			res.Config.API, res.Requests(), res.RequestRate(), res.Allowed, res.Denied, res.ErrorCount(), res.Latency.Quantile(0.99))
		if res.ErrorCount() > 0 {
			t.Errorf("%v: errors %v", res.Config.API, res.Errors)
		}
		if res.Allowed == 0 || res.Denied == 0 {
			t.Errorf("%v: %d allowed and %d denied, want both (the limit must be exercised)", res.Config.API, res.Allowed, res.Denied)
		}
	}
}

// resources are the server's measurements after a forced GC.
type resources struct {
	goroutines int
	heapInuse  float64
	fds        int // every open fd, Redis connections included
	redisConns int // TCP connections to the Redis port
}

func (r resources) String() string {
	return fmt.Sprintf("%d goroutines, %.1f MiB heap in use, %d open fds (%d of them to Redis)", r.goroutines, r.heapInuse/(1<<20), r.fds, r.redisConns)
}

// within reports whether r is within the soak margins of base: the fds
// other than Redis connections within a slack of their baseline, the
// Redis connections within go-redis' pool bounds.
func (r resources) within(base resources) bool {
	return r.goroutines <= base.goroutines+soakGoroutineSlack &&
		r.fds-r.redisConns <= base.fds-base.redisConns+soakFDSlack &&
		r.redisConns <= soakRedisPool+redisPipelinePool &&
		r.heapInuse <= base.heapInuse*(1+soakHeapRatio)+soakHeapSlack
}

// settle measures the server until two measurements in a row agree (the
// baseline, base nil) or until it is within the margins of base, polling
// up to soakSettle; it fails t when base is set and the margins are not
// met by then.
func settle(t *testing.T, p *proc, redisPort, pid int, base *resources) resources {
	t.Helper()
	deadline := time.Now().Add(soakSettle)
	prev := measure(t, p, redisPort, pid)
	for {
		time.Sleep(250 * time.Millisecond) // polling interval
		cur := measure(t, p, redisPort, pid)
		switch {
		case base == nil && cur.goroutines == prev.goroutines && cur.fds == prev.fds:
			return cur
		case base != nil && cur.within(*base):
			return cur
		case time.Now().After(deadline):
			if base != nil {
				t.Logf("open fds: %v", fdTargets(pid))
				t.Fatalf("%v after the load ended, resources are %s; before it %s (margins: +%d goroutines, +%d fds besides Redis, at most %d Redis connections, heap +%.0f%% +%d MiB)",
					soakSettle, cur, *base, soakGoroutineSlack, soakFDSlack, soakRedisPool+redisPipelinePool, soakHeapRatio*100, soakHeapSlack>>20)
			}
			t.Logf("baseline did not settle within %v; using %s", soakSettle, cur)
			return cur
		}
		prev = cur
	}
}

// goroutineTotal matches the first line of /debug/pprof/goroutine?debug=1.
var goroutineTotal = regexp.MustCompile(`goroutine profile: total (\d+)`)

// measure forces a GC (/debug/pprof/heap?gc=1), then reads the goroutine
// count, go_memstats_heap_inuse_bytes, the number of open fds of pid and
// how many of them are TCP connections to redisPort.
func measure(t *testing.T, p *proc, redisPort, pid int) resources {
	t.Helper()
	// No keep-alive: the scrape's own connection must not count.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	get := func(path string) []byte {
		resp, err := hc.Get("http://" + p.HTTPAddr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return b
	}
	var r resources
	get("/debug/pprof/heap?gc=1")
	m := goroutineTotal.FindSubmatch(get("/debug/pprof/goroutine?debug=1"))
	if m == nil {
		t.Fatal("/debug/pprof/goroutine?debug=1: no total")
	}
	r.goroutines, _ = strconv.Atoi(string(m[1]))
	samples, err := parseMetrics(bytes.NewReader(get("/metrics")))
	if err != nil {
		t.Fatal(err)
	}
	heap, ok := metricValue(samples, "go_memstats_heap_inuse_bytes")
	if !ok {
		t.Fatal("/metrics: no go_memstats_heap_inuse_bytes")
	}
	r.heapInuse = heap
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		t.Fatalf("open fds of floodgate (pid %d): %v", pid, err)
	}
	r.fds = len(fds)
	r.redisConns = tcpConnsTo(t, pid, redisPort)
	return r
}

// tcpConnsTo counts pid's open sockets that are TCP connections to the
// remote port: their inodes, from /proc/<pid>/fd, looked up in
// /proc/<pid>/net/tcp and tcp6.
func tcpConnsTo(t *testing.T, pid, port int) int {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	toPort := map[string]bool{} // socket inodes connected to port
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(dir, "net", name))
		if err != nil {
			t.Fatalf("TCP table of floodgate (pid %d): %v", pid, err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 {
				continue
			}
			i := strings.LastIndexByte(f[2], ':')
			if rp, err := strconv.ParseUint(f[2][i+1:], 16, 16); err == nil && int(rp) == port {
				toPort[f[9]] = true
			}
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		t.Fatalf("open fds of floodgate (pid %d): %v", pid, err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, "fd", e.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") && toPort[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] {
			n++
		}
	}
	return n
}

// fdTargets counts pid's open fds by what they point at ("socket",
// "pipe", "anon_inode:[eventpoll]", or a file path), for failure output.
func fdTargets(pid int) map[string]int {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, _ := os.ReadDir(dir)
	out := map[string]int{}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if i := strings.Index(target, ":["); i > 0 && !strings.HasPrefix(target, "anon_inode") {
			target = target[:i]
		}
		out[target]++
	}
	return out
}
