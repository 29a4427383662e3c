package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// These tests take Redis away from a running floodgate: killed mid-load,
// paused (slow), restarted. The caller must never see anything but an
// answer, in time, as the limit's failure_mode declares.

// failureRules declares one open and one closed limit on each API. The
// limits are so large that no healthy decision in these tests is a deny:
// every deny seen is a failure-mode answer.
const failureRules = `domain: fail
default_algorithm: token_bucket
descriptors:
  - key: open_k
    rate_limit: {unit: hour, requests_per_unit: 1000000, failure_mode: open}
  - key: closed_k
    rate_limit: {unit: hour, requests_per_unit: 1000000, failure_mode: closed}
policies:
  open_p:   {requests: 1000000, period: 1h, failure_mode: open}
  closed_p: {requests: 1000000, period: 1h, failure_mode: closed}
`

// redisTimeout is the --redis-timeout of these tests: the binary's default.
const redisTimeout = 50 * time.Millisecond

// latencyMargin is what a call may take beyond --redis-timeout: gRPC over
// loopback to a -race binary, on a 2-core machine loaded by other test
// packages. The slowest call seen on a quiet machine was about 60ms; at a
// load average of 20-30 a whole niced -race process was once seen to stall
// for about 850ms at the moment Redis was killed (calls and the breaker
// alike), so the margin is 1.2s. A call that waited out a paused Redis (2s),
// or a dial to a dead one (seconds), still exceeds the bound.
const latencyMargin = 1200 * time.Millisecond

// storeHealthService is the grpc.health.v1 service reporting the store.
const storeHealthService = "floodgate.store"

// startOnRedis starts floodgate on r with the failure rules and args.
func startOnRedis(t *testing.T, r *redistest.Server, args ...string) *proc {
	t.Helper()
	base := []string{"--config", writeRules(t, failureRules), "--redis-url", "redis://" + r.Addr(), "--redis-timeout", redisTimeout.String()}
	return startServe(t, append(base, args...)...)
}

// policyCheck is a Check of cost 1 under a named policy.
func policyCheck(policy, key string) *floodgatev1.CheckRequest {
	return &floodgatev1.CheckRequest{Key: key, Source: &floodgatev1.CheckRequest_Policy{Policy: policy}}
}

// storeStatus is the health status of floodgate.store.
func storeStatus(t *testing.T, h healthpb.HealthClient) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: storeHealthService})
	if err != nil {
		t.Fatalf("health %s: %v", storeHealthService, err)
	}
	return r.Status
}

// waitFor polls cond every 10ms until it holds or bound passes, and
// returns how long it took; it fails t with what when the bound passes.
func waitFor(t *testing.T, bound time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > bound {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// waitStoreStatus waits until floodgate.store reports want.
func waitStoreStatus(t *testing.T, h healthpb.HealthClient, want healthpb.HealthCheckResponse_ServingStatus, bound time.Duration) time.Duration {
	t.Helper()
	return waitFor(t, bound, "health "+storeHealthService+" "+want.String(), func() bool { return storeStatus(t, h) == want })
}

// outcome is one Check of a load run.
type outcome struct {
	policy  string
	took    time.Duration
	resp    *floodgatev1.CheckResponse
	err     error
	started time.Time
}

// load runs workers goroutines issuing Checks, alternating open_p and
// closed_p on keys of their own, until stop is closed; it returns every
// outcome.
func load(c floodgatev1.RateLimiterClient, workers int, stop <-chan struct{}, count *atomic.Int64) []outcome {
	var mu sync.Mutex
	var all []outcome
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []outcome
			for i := 0; ; i++ {
				select {
				case <-stop:
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
					return
				default:
				}
				pol := []string{"open_p", "closed_p"}[i%2]
				// The call's own deadline is far beyond the bound asserted,
				// so a slow call is measured, not cut short.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				resp, err := c.Check(ctx, policyCheck(pol, fmt.Sprintf("w%d:%d", w, i%50)))
				cancel()
				mine = append(mine, outcome{policy: pol, took: time.Since(start), resp: resp, err: err, started: start})
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	return all
}

// checkOutcomes asserts the failure-mode contract on every outcome: no
// error, no call slower than the bound, healthy answers allowed, degraded
// open answers allowed, degraded closed answers denied with a retry_after.
// It returns the number of degraded answers per policy.
func checkOutcomes(t *testing.T, outs []outcome, bound time.Duration) map[string]int {
	t.Helper()
	degraded := map[string]int{}
	var slowest time.Duration
	for _, o := range outs {
		slowest = max(slowest, o.took)
		if o.err != nil {
			t.Errorf("%s: error %v (code %v), want an answer", o.policy, o.err, status.Code(o.err))
			continue
		}
		if o.took > bound {
			t.Errorf("%s: call took %v, more than %v (started %v)", o.policy, o.took, bound, o.started.Format("15:04:05.000"))
		}
		r := o.resp
		switch {
		case !r.Degraded && !r.Allowed:
			t.Errorf("%s: healthy answer denied: %v", o.policy, r)
		case r.Degraded && o.policy == "open_p" && !r.Allowed:
			t.Errorf("open_p: degraded answer denied, want allowed: %v", r)
		case r.Degraded && o.policy == "closed_p" && (r.Allowed || r.RetryAfter.AsDuration() <= 0):
			t.Errorf("closed_p: degraded answer %v, want denied with retry_after > 0", r)
		}
		if r.Degraded {
			degraded[o.policy]++
		}
	}
	t.Logf("%d calls, slowest %v, degraded %v", len(outs), slowest, degraded)
	return degraded
}

// firstHealthy polls Checks on policy until one is answered by the store
// (not degraded) and returns how long that took after start.
func firstHealthy(t *testing.T, c floodgatev1.RateLimiterClient, policy string, start time.Time, bound time.Duration) time.Duration {
	t.Helper()
	for i := 0; ; i++ {
		resp, err := c.Check(context.Background(), policyCheck(policy, fmt.Sprintf("recover:%d", i)))
		if err != nil {
			t.Fatalf("%s during recovery: %v", policy, err)
		}
		if !resp.Degraded {
			if !resp.Allowed {
				t.Fatalf("%s: first healthy answer denied: %v", policy, resp)
			}
			return time.Since(start)
		}
		if time.Since(start) > bound {
			t.Fatalf("%s: still degraded %v after Redis returned", policy, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// httpStatus GETs path on the admin port and returns the status code.
func httpStatus(t *testing.T, p *proc, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestFailureRedisKilledMidLoad kills Redis under load: every call still
// answers in time, open limits allow and closed ones deny (both marked
// degraded) on both APIs, the store's health goes NOT_SERVING; Redis
// restarted on the same port brings healthy decisions back within a
// second or so and the health back to SERVING.
func TestFailureRedisKilledMidLoad(t *testing.T) {
	r := redistest.StartServer(t)
	p := startOnRedis(t, r)
	conn := p.Conn(t)
	c := floodgatev1.NewRateLimiterClient(conn)
	h := healthpb.NewHealthClient(conn)
	rls := rlsv3.NewRateLimitServiceClient(conn)
	bound := redisTimeout + latencyMargin

	// Warm up: one healthy answer per policy, so scripts are loaded and
	// the connections exist before the load starts.
	firstHealthy(t, c, "open_p", time.Now(), 10*time.Second)
	firstHealthy(t, c, "closed_p", time.Now(), 10*time.Second)
	if st := storeStatus(t, h); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("store health before the kill: %v", st)
	}

	stop := make(chan struct{})
	var count atomic.Int64
	done := make(chan []outcome, 1)
	go func() { done <- load(c, 8, stop, &count) }()

	// Let the load run healthy for about half a second, then kill Redis.
	waitFor(t, 10*time.Second, "load started", func() bool { return count.Load() >= 50 })
	time.Sleep(400 * time.Millisecond) // load schedule, not an assertion
	before := count.Load()
	r.Kill()
	killed := time.Now()
	openedAfter := waitStoreStatus(t, h, healthpb.HealthCheckResponse_NOT_SERVING, 3*time.Second)
	t.Logf("breaker open %v after the kill (%d calls before it)", openedAfter, before)
	// Keep loading the dead Redis for half a second more.
	atLeast := count.Load() + 100
	waitFor(t, 10*time.Second, "load after the kill", func() bool { return count.Load() >= atLeast })
	time.Sleep(400 * time.Millisecond) // load schedule, not an assertion
	close(stop)
	outs := <-done

	var afterKill []outcome
	for _, o := range outs {
		if o.started.After(killed.Add(openedAfter)) {
			afterKill = append(afterKill, o)
		}
	}
	all := checkOutcomes(t, outs, bound)
	deg := checkOutcomes(t, afterKill, bound)
	// Every degraded answer is counted, by policy, and the breaker shows.
	m := scrape(t, p)
	for _, pol := range []string{"open_p", "closed_p"} {
		wantMetric(t, m, float64(all[pol]), "floodgate_decisions_total", "api", "check", "rule", pol, "result", "degraded")
	}
	wantMetric(t, m, 1, "floodgate_breaker_state")
	if errs, _ := metricValue(m, "floodgate_store_errors_total", "backend", "redis", "op", "decide"); errs < 3 {
		t.Errorf("floodgate_store_errors_total{op=decide} = %v after the kill, want at least the 3 that opened the breaker", errs)
	}
	// Once the breaker is open, every answer is a failure-mode answer.
	for _, pol := range []string{"open_p", "closed_p"} {
		n := 0
		for _, o := range afterKill {
			if o.policy == pol {
				n++
			}
		}
		if n == 0 || deg[pol] != n {
			t.Errorf("%s: %d of %d answers degraded while the breaker was open, want all (and some)", pol, deg[pol], n)
		}
	}

	// The Envoy API during the outage.
	resp, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "fail", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("open_k", "a")}})
	if err != nil {
		t.Fatal(err)
	}
	if hs := rlsHeaders(resp); resp.OverallCode != rlsv3.RateLimitResponse_OK || hs["x-ratelimit-degraded"] != "true" {
		t.Errorf("envoy open_k during the outage: %s %v, want OK with x-ratelimit-degraded: true", rlsCodes(resp), hs)
	}
	resp, err = rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "fail", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("closed_k", "a")}})
	if err != nil {
		t.Fatal(err)
	}
	if hs := rlsHeaders(resp); resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || hs["x-ratelimit-degraded"] != "true" || hs["retry-after"] == "" || hs["retry-after"] == "0" {
		t.Errorf("envoy closed_k during the outage: %s %v, want OVER_LIMIT with x-ratelimit-degraded and a positive retry-after", rlsCodes(resp), hs)
	}

	// Still alive, and live.
	select {
	case err := <-p.done:
		p.done <- err
		t.Fatalf("floodgate exited during the outage: %v\n%s", err, p.logs)
	default:
	}
	if code := httpStatus(t, p, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz during the outage: %d", code)
	}
	// --failure-mode is open (the default): still ready.
	if code := httpStatus(t, p, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz during the outage with --failure-mode open: %d, want 200", code)
	}

	r.Restart()
	back := time.Now()
	for _, pol := range []string{"open_p", "closed_p"} {
		t.Logf("%s: healthy again %v after Redis answered PING", pol, firstHealthy(t, c, pol, back, 3*time.Second))
	}
	resp, err = rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "fail", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("closed_k", "a")}})
	if err != nil {
		t.Fatal(err)
	}
	if hs := rlsHeaders(resp); resp.OverallCode != rlsv3.RateLimitResponse_OK || hs["x-ratelimit-degraded"] != "" {
		t.Errorf("envoy closed_k after recovery: %s %v, want OK, not degraded", rlsCodes(resp), hs)
	}
	waitStoreStatus(t, h, healthpb.HealthCheckResponse_SERVING, 3*time.Second)
}

// TestReadyWhileRedisDown: a replica whose Redis is down stays ready,
// even with --failure-mode closed: it still answers every limit by its
// failure mode. (It used to turn not ready, and with every replica not
// ready at once Envoy's filter, failure_mode_deny: false, let everything
// through, closed limits included.) The store's gRPC health follows an
// active probe: NOT_SERVING soon after the kill with no traffic at all
// (it used to say SERVING until a decision failed), SERVING again after
// the restart.
func TestReadyWhileRedisDown(t *testing.T) {
	r := redistest.StartServer(t)
	p := startOnRedis(t, r, "--failure-mode", "closed")
	h := healthpb.NewHealthClient(p.Conn(t))
	if code := httpStatus(t, p, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with Redis up: %d", code)
	}
	if st := storeStatus(t, h); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("store health with Redis up: %v", st)
	}
	r.Kill()
	took := waitStoreStatus(t, h, healthpb.HealthCheckResponse_NOT_SERVING, 3*time.Second)
	t.Logf("floodgate.store NOT_SERVING %v after the kill, with no traffic", took)
	if code := httpStatus(t, p, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with Redis down: %d, want 200 (the failure modes answer)", code)
	}
	if code := httpStatus(t, p, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with Redis down: %d, want 200", code)
	}
	resp, err := p.Client(t).Check(context.Background(), policyCheck("closed_p", "a"))
	if err != nil || resp.Allowed || !resp.Degraded {
		t.Errorf("closed_p with Redis down: %v %v, want denied, degraded", resp, err)
	}
	r.Restart()
	waitStoreStatus(t, h, healthpb.HealthCheckResponse_SERVING, 3*time.Second)
	if code := httpStatus(t, p, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the restart: %d", code)
	}
}

// linesAfter counts the log lines containing sub logged after the first
// line containing first.
func linesAfter(p *proc, first, sub string) int {
	p.logs.mu.Lock()
	defer p.logs.mu.Unlock()
	n, seen := 0, false
	for _, l := range p.logs.lines {
		switch {
		case !seen:
			seen = strings.Contains(l, first)
		case strings.Contains(l, sub):
			n++
		}
	}
	return n
}

// logLines counts the process' log lines holding every one of subs.
func logLines(p *proc, subs ...string) int {
	p.logs.mu.Lock()
	defer p.logs.mu.Unlock()
	n := 0
next:
	for _, l := range p.logs.lines {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		n++
	}
	return n
}

// nonJSONLines are the process' log lines that are not JSON objects.
func nonJSONLines(p *proc) []string {
	p.logs.mu.Lock()
	defer p.logs.mu.Unlock()
	var bad []string
	for _, l := range p.logs.lines {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) != nil {
			bad = append(bad, l)
		}
	}
	return bad
}

// TestFailureOutageLogs: an outage under load logs its transitions, not
// its decisions: one WARN when the store first fails (it used to be one
// per failed decision, thousands here), one INFO when it decides again,
// while the metrics count every degraded decision. With --log-format json
// every line is JSON, go-redis' own lines ("failed to dial") included:
// they used to be plain "redis: …" lines on stderr.
func TestFailureOutageLogs(t *testing.T) {
	r := redistest.StartServer(t)
	p := startOnRedis(t, r)
	c := p.Client(t)
	firstHealthy(t, c, "open_p", time.Now(), 10*time.Second)
	firstHealthy(t, c, "closed_p", time.Now(), 10*time.Second)

	stop := make(chan struct{})
	var count atomic.Int64
	done := make(chan []outcome, 1)
	go func() { done <- load(c, 8, stop, &count) }()
	waitFor(t, 10*time.Second, "load started", func() bool { return count.Load() >= 50 })
	r.Kill()
	atLeast := count.Load() + 2000
	waitFor(t, 30*time.Second, "load after the kill", func() bool { return count.Load() >= atLeast })
	close(stop)
	deg := checkOutcomes(t, <-done, redisTimeout+latencyMargin)
	if deg["open_p"]+deg["closed_p"] < 1000 {
		t.Fatalf("%v degraded answers, want at least 1000 for this test to mean something", deg)
	}
	m := scrape(t, p)
	for _, pol := range []string{"open_p", "closed_p"} {
		wantMetric(t, m, float64(deg[pol]), "floodgate_decisions_total", "api", "check", "rule", pol, "result", "degraded")
	}
	failed := logLines(p, "store could not decide") + logLines(p, "store still failing")
	t.Logf("%d degraded answers; %d lines of failed decisions, %d WARN lines in all", deg["open_p"]+deg["closed_p"], failed, logLines(p, `"level":"WARN"`))
	if failed != 1 {
		t.Errorf("%d lines of failed decisions, want 1", failed)
	}
	if n := logLines(p, "store unreachable"); n != 1 {
		t.Errorf("%d \"store unreachable\" lines, want 1", n)
	}
	if bad := nonJSONLines(p); len(bad) > 0 {
		t.Errorf("%d log lines are not JSON, e.g. %q", len(bad), bad[0])
	}

	r.Restart()
	firstHealthy(t, c, "open_p", time.Now(), 3*time.Second)
	waitFor(t, 3*time.Second, "the recovery logged", func() bool { return logLines(p, "store deciding again") > 0 })
	if n := logLines(p, "store deciding again"); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}
	if t.Failed() {
		lines := strings.Split(p.logs.String(), "\n")
		t.Logf("the log's first lines of %d:\n%s", len(lines), strings.Join(lines[:min(len(lines), 40)], "\n"))
	}
}

// TestReadyMisconfiguredStartup: a Redis that answers but can never decide
// in --redis-mode is a configuration error: floodgate refuses to start and
// says how to fix it. (It used to start, report itself ready and answer
// every decision by its failure mode: every limit open.)
func TestReadyMisconfiguredStartup(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	master := redistest.StartServer(t)
	replica := redistest.StartServer(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port()))
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"standalone on a cluster node", []string{"--redis-url", "redis://" + cl.Addrs()[0]}, []string{"Redis Cluster node", "--redis-mode cluster"}},
		{"standalone on a replica", []string{"--redis-url", "redis://" + replica.Addr()}, []string{"read-only replica", "point --redis-url at the master (" + master.Addr() + ")"}},
		{"cluster on a plain Redis", []string{"--redis-mode", "cluster", "--redis-url", "redis://" + master.Addr()}, []string{"--redis-mode standalone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, tc.args...)
			_, stderr, code := runCLI(t, args...)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// httpGet GETs path on the admin port and returns the status and body.
func httpGet(t *testing.T, p *proc, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestReadyMisconfiguredAtRunTime: the Redis floodgate uses turns into a
// replica while serving (REPLICAOF): decisions answer by failure mode,
// /readyz fails naming the cause, and the log says so once however many
// decisions fail; made a master again, it is ready and decides again.
func TestReadyMisconfiguredAtRunTime(t *testing.T) {
	r := redistest.StartServer(t)
	other := redistest.StartServer(t)
	p := startOnRedis(t, r)
	c := p.Client(t)
	firstHealthy(t, c, "open_p", time.Now(), 10*time.Second)
	if err := r.Client().Do(context.Background(), "REPLICAOF", "127.0.0.1", other.Port()).Err(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var count atomic.Int64
	done := make(chan []outcome, 1)
	go func() { done <- load(c, 4, stop, &count) }()
	waitFor(t, 5*time.Second, "/readyz 503", func() bool { code, _ := httpGet(t, p, "/readyz"); return code == http.StatusServiceUnavailable })
	atLeast := count.Load() + 500
	waitFor(t, 30*time.Second, "load on the replica", func() bool { return count.Load() >= atLeast })
	close(stop)
	deg := checkOutcomes(t, <-done, redisTimeout+latencyMargin)
	if deg["open_p"] == 0 || deg["closed_p"] == 0 {
		t.Errorf("degraded answers on the replica: %v, want some of each", deg)
	}
	code, body := httpGet(t, p, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "read-only replica") || !strings.Contains(body, other.Addr()) {
		t.Errorf("/readyz on a replica: %d %q, want 503 naming the replica and its master %s", code, body, other.Addr())
	}
	// One line per change of the store's state, not one per decision: a
	// second "misconfigured" line needs an "unreachable" one before it (a
	// health ping that timed out on a busy machine is such a change).
	if n, flips := logLines(p, "store misconfigured", `"level":"ERROR"`), linesAfter(p, "store misconfigured", "store unreachable"); n < 1 || n > 1+flips {
		t.Errorf("%d \"store misconfigured\" lines and %d \"store unreachable\" lines between them after %d decisions, want 1 and one more per unreachable line\n%s", n, flips, count.Load(), p.logs)
	}
	if n := logLines(p, "store could not decide") + logLines(p, "store still failing"); n > 1 {
		t.Errorf("%d lines of failed decisions, want at most 1", n)
	}

	if err := r.Client().Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "/readyz 200", func() bool { code, _ := httpGet(t, p, "/readyz"); return code == http.StatusOK })
	firstHealthy(t, c, "closed_p", time.Now(), 3*time.Second)
}

// TestFailureSlowRedis pauses Redis (CLIENT PAUSE 2000 ALL): calls keep
// answering within the timeout plus the margin, by failure mode, and
// healthy answers return when the pause ends.
func TestFailureSlowRedis(t *testing.T) {
	r := redistest.StartServer(t)
	p := startOnRedis(t, r)
	conn := p.Conn(t)
	c := floodgatev1.NewRateLimiterClient(conn)
	h := healthpb.NewHealthClient(conn)
	firstHealthy(t, c, "open_p", time.Now(), 10*time.Second)
	firstHealthy(t, c, "closed_p", time.Now(), 10*time.Second)

	const pause = 2 * time.Second
	if err := r.Client().Do(context.Background(), "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()

	stop := make(chan struct{})
	var count atomic.Int64
	done := make(chan []outcome, 1)
	go func() { done <- load(c, 4, stop, &count) }()
	// Load for about a second, well inside the pause.
	time.Sleep(time.Second) // load schedule, not an assertion
	close(stop)
	outs := <-done
	var inPause []outcome
	for _, o := range outs {
		if o.started.Add(o.took).Before(paused.Add(pause)) {
			inPause = append(inPause, o)
		}
	}
	deg := checkOutcomes(t, outs, redisTimeout+latencyMargin)
	if deg["open_p"] == 0 || deg["closed_p"] == 0 {
		t.Errorf("degraded answers during the pause: %v, want some for each policy", deg)
	}
	for _, o := range inPause {
		if o.err == nil && !o.resp.Degraded {
			t.Errorf("%s: healthy answer while Redis was paused: %v", o.policy, o.resp)
		}
	}
	if st := storeStatus(t, h); time.Since(paused) < pause && st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("store health during the pause: %v, want NOT_SERVING", st)
	}

	// The pause ends by itself; healthy answers follow.
	took := firstHealthy(t, c, "closed_p", paused, pause+3*time.Second)
	t.Logf("healthy again %v after the pause began (pause %v)", took, pause)
	waitStoreStatus(t, h, healthpb.HealthCheckResponse_SERVING, 3*time.Second)
}

// TestFailureRedisRestartFlushesScripts: Redis loses its scripts (SCRIPT
// FLUSH, or a restart): the next checks are answered by the store, with no
// error and no degraded answer reaching the client.
func TestFailureRedisRestartFlushesScripts(t *testing.T) {
	r := redistest.StartServer(t)
	p := startOnRedis(t, r, "--redis-timeout", "2s") // a slow moment must not pass for a failure here
	c := p.Client(t)
	check := func(step, key string) {
		t.Helper()
		for _, pol := range []string{"open_p", "closed_p"} {
			resp, err := c.Check(context.Background(), policyCheck(pol, key))
			if err != nil || !resp.Allowed || resp.Degraded {
				t.Fatalf("%s: %s: got %v %v, want allowed by the store", step, pol, resp, err)
			}
		}
	}
	check("before", "a")

	if err := r.Client().ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	check("after SCRIPT FLUSH", "a")

	r.Restart()
	check("after a restart, first check", "a")
	for i := range 20 {
		check("after a restart", fmt.Sprint("k", i))
	}
}

// TestFailureDegradedNotCounted pins the contract of `degraded` (see
// CheckResponse.degraded in the proto): Redis stalls (DEBUG SLEEP) while
// checks arrive; each is answered by its failure mode after
// --redis-timeout, and the scripts already written to Redis, which run
// when it wakes, find their deadline passed and charge nothing. The key's
// count afterwards is exactly the healthy charges: no degraded answer
// counted, and no refund.
func TestFailureDegradedNotCounted(t *testing.T) {
	r := redistest.StartServer(t, "--enable-debug-command", "yes")
	p := startOnRedis(t, r)
	c := p.Client(t)
	check := func() *floodgatev1.CheckResponse {
		t.Helper()
		// A token bucket that refills one unit in 1000 hours: remaining
		// counts the charges, unmoved by the test's seconds.
		resp, err := c.Check(context.Background(), &floodgatev1.CheckRequest{
			Key:       "charged",
			Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
			Source:    &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1000, Period: durationpb.New(1000 * time.Hour)}},
		})
		if err != nil || !resp.Allowed {
			t.Fatalf("check: %v %v, want allowed", resp, err)
		}
		return resp
	}
	firstHealthy(t, c, "open_p", time.Now(), 10*time.Second)
	first := check()
	if first.Degraded {
		t.Fatalf("first check degraded: %v", first)
	}
	slept := make(chan error, 1)
	go func() { slept <- r.Client().Do(context.Background(), "DEBUG", "SLEEP", "1").Err() }()
	time.Sleep(200 * time.Millisecond) // let the sleep begin: schedule, not an assertion
	degraded := 0
	for range 3 {
		if resp := check(); resp.Degraded {
			degraded++
		}
	}
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
	if degraded == 0 {
		t.Fatal("no check was answered degraded while Redis slept")
	}
	firstHealthy(t, c, "open_p", time.Now(), 5*time.Second)
	last := check()
	if last.Degraded {
		t.Fatalf("check after the stall degraded: %v", last)
	}
	counted := first.Remaining - last.Remaining - 1
	if counted != 0 {
		t.Errorf("remaining %d before the stall, %d after it and one healthy check: %d degraded answers counted of %d, want 0", first.Remaining, last.Remaining, counted, degraded)
	}
}
