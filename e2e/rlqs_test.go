package e2e

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/internal/redistest"
)

// rlqsConfig: a per-key budget of 100 a minute for the free tier, a ban,
// and the default for everything else (allow_all).
const rlqsConfig = `domain: edge
quota_buckets:
  - bucket_id: {tier: free, api_key: "*"}
    rate_limit: {unit: minute, requests_per_unit: 100}
  - bucket_id: {tier: banned}
    blanket_rule: deny_all
`

// envoyInstance is one Envoy's rate_limit_quota filter, as far as the
// server can tell: one stream, reports, and the latest action per bucket.
type envoyInstance struct {
	t      *testing.T
	stream rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient
	cancel context.CancelFunc
	domain string // sent with the first message only

	mu      sync.Mutex
	changed chan struct{}
	latest  map[string]*rlqsv3.RateLimitQuotaResponse_BucketAction
	count   map[string]int // actions received per bucket
	end     error          // how the stream ended (io.EOF: OK)
	ended   chan struct{}
}

func newEnvoy(t *testing.T, p *proc, domain string) *envoyInstance {
	t.Helper()
	return newEnvoyOn(t, p.Conn(t), domain)
}

// newEnvoyOn is newEnvoy over conn.
func newEnvoyOn(t *testing.T, conn grpc.ClientConnInterface, domain string) *envoyInstance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	e := &envoyInstance{t: t, stream: s, cancel: cancel, domain: domain, changed: make(chan struct{}, 1),
		latest: map[string]*rlqsv3.RateLimitQuotaResponse_BucketAction{}, count: map[string]int{}, ended: make(chan struct{})}
	go func() {
		for {
			r, err := s.Recv()
			e.mu.Lock()
			if err != nil {
				e.end = err
				e.mu.Unlock()
				close(e.ended)
				return
			}
			for _, a := range r.GetBucketAction() {
				k := bucketKey(a.GetBucketId().GetBucket())
				e.latest[k] = a
				e.count[k]++
			}
			e.mu.Unlock()
			select {
			case e.changed <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(cancel)
	return e
}

// bucketKey is a bucket id as "k=v,k=v", sorted.
func bucketKey(b map[string]string) string {
	var kv []string
	for k, v := range b {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// report sends one usage report of bucket (given as "k=v,k=v").
func (e *envoyInstance) report(bucket string, allowed, denied uint64, elapsed time.Duration) {
	e.t.Helper()
	id := map[string]string{}
	for _, kv := range strings.Split(bucket, ",") {
		k, v, _ := strings.Cut(kv, "=")
		id[k] = v
	}
	e.send(id, allowed, denied, elapsed)
}

// send sends one usage report of the bucket id.
func (e *envoyInstance) send(id map[string]string, allowed, denied uint64, elapsed time.Duration) {
	e.t.Helper()
	if err := e.stream.Send(usageReport(e.domain, id, allowed, denied, elapsed)); err != nil {
		e.t.Fatalf("Send: %v", err)
	}
	e.domain = ""
}

// usageReport is one report of bucket id's usage over elapsed.
func usageReport(domain string, id map[string]string, allowed, denied uint64, elapsed time.Duration) *rlqsv3.RateLimitQuotaUsageReports {
	u := &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqsv3.BucketId{Bucket: id}, TimeElapsed: durationpb.New(elapsed)}
	u.NumRequestsAllowed, u.NumRequestsDenied = allowed, denied
	return &rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{u}}
}

// waitFor waits until the latest action on bucket satisfies ok, and
// returns it.
func (e *envoyInstance) waitFor(bucket, what string, ok func(a *rlqsv3.RateLimitQuotaResponse_BucketAction) bool) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	e.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		e.mu.Lock()
		a := e.latest[bucket]
		e.mu.Unlock()
		if a != nil && ok(a) {
			return a
		}
		select {
		case <-e.changed:
		case <-e.ended:
			e.mu.Lock()
			a = e.latest[bucket]
			e.mu.Unlock()
			if a != nil && ok(a) {
				return a
			}
			e.t.Fatalf("stream ended (%v) before %s on %s; last %v", e.end, what, bucket, a)
		case <-deadline:
			e.t.Fatalf("no %s on %s within 15s; last %v", what, bucket, a)
		}
	}
}

// shareOf is the requests per period an action assigns: -1 for DENY_ALL,
// -2 for ALLOW_ALL, -3 for an abandon.
func shareOf(a *rlqsv3.RateLimitQuotaResponse_BucketAction) int64 {
	if a.GetAbandonAction() != nil {
		return -3
	}
	s := a.GetQuotaAssignmentAction().GetRateLimitStrategy()
	switch x := s.GetStrategy().(type) {
	case *typev3.RateLimitStrategy_BlanketRule_:
		if x.BlanketRule == typev3.RateLimitStrategy_DENY_ALL {
			return -1
		}
		return -2
	case *typev3.RateLimitStrategy_RequestsPerTimeUnit_:
		return int64(x.RequestsPerTimeUnit.GetRequestsPerTimeUnit())
	case *typev3.RateLimitStrategy_TokenBucket:
		return int64(x.TokenBucket.GetTokensPerFill().GetValue())
	}
	return -4
}

// share waits for an assignment of want on bucket.
func (e *envoyInstance) share(bucket string, want int64) {
	e.t.Helper()
	e.waitFor(bucket, "share "+strconv.FormatInt(want, 10), func(a *rlqsv3.RateLimitQuotaResponse_BucketAction) bool { return shareOf(a) == want })
}

func writeConfig(t *testing.T, path, yaml string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func rlqsConfigFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge.yaml")
	writeConfig(t, path, rlqsConfig)
	return path
}

// TestRLQSSubscribeAssign: the first report of a bucket subscribes it and
// is answered with its assignment, with a time to live; a lone instance
// gets the whole budget; deny_all and unmatched buckets get blanket rules;
// the reported usage shows in the metrics; the stream outlives the unary
// deadline.
func TestRLQSSubscribeAssign(t *testing.T) {
	// The stream is a streaming method for the transport gate: it
	// outlives --unary-timeout.
	p := startServe(t, "--config", rlqsConfigFile(t), "--unary-timeout", "300ms")
	e := newEnvoy(t, p, "edge")
	e.report("api_key=k1,tier=free", 1, 0, 0)
	a := e.waitFor("api_key=k1,tier=free", "an assignment", func(*rlqsv3.RateLimitQuotaResponse_BucketAction) bool { return true })
	qa := a.GetQuotaAssignmentAction()
	rptu := qa.GetRateLimitStrategy().GetRequestsPerTimeUnit()
	if rptu.GetRequestsPerTimeUnit() != 100 || rptu.GetTimeUnit() != typev3.RateLimitUnit_MINUTE {
		t.Errorf("strategy %v, want 100 per MINUTE", qa.GetRateLimitStrategy())
	}
	if ttl := qa.GetAssignmentTimeToLive().AsDuration(); ttl < 10*time.Second {
		t.Errorf("assignment_time_to_live %v, want at least 10s", ttl)
	}
	e.report("tier=banned", 0, 3, time.Second)
	e.share("tier=banned", -1)
	e.report("tier=gold", 5, 0, time.Second)
	e.share("tier=gold", -2)
	// Re-sending the same strategy extends its TTL: each report is answered.
	time.Sleep(time.Second)
	e.report("api_key=k1,tier=free", 40, 2, time.Second)
	e.waitFor("api_key=k1,tier=free", "a second assignment", func(*rlqsv3.RateLimitQuotaResponse_BucketAction) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.count["api_key=k1,tier=free"] >= 2
	})
	samples := scrape(t, p)
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"floodgate_quota_reported_requests_total", []string{"rule", "edge.quota.api_key_*.tier_free", "result", "allowed"}, 41},
		{"floodgate_quota_reported_requests_total", []string{"rule", "edge.quota.tier_banned", "result", "denied"}, 3},
		{"floodgate_quota_reported_requests_total", []string{"rule", "unmatched", "result", "allowed"}, 5},
		{"floodgate_quota_streams", nil, 1},
		{"floodgate_quota_buckets", nil, 3},
		{"floodgate_quota_assignments_total", []string{"action", "deny_all"}, 1},
	} {
		if got, _ := metricValue(samples, m.name, m.labels...); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
}

// rlqsBackends are the deployments the fair-share tests run on: one
// replica with the embedded store, and two replicas sharing a Redis (the
// two instances then talk to different replicas).
func rlqsBackends(t *testing.T, cfg string) map[string]func(t *testing.T) (a, b *proc) {
	return map[string]func(t *testing.T) (a, b *proc){
		"embedded": func(t *testing.T) (a, b *proc) {
			p := startServe(t, "--config", cfg)
			return p, p
		},
		"redis-two-replicas": func(t *testing.T) (a, b *proc) {
			url := "redis://" + redistest.StartServer(t).Addr()
			return startServe(t, "--config", cfg, "--redis-url", url), startServe(t, "--config", cfg, "--redis-url", url)
		},
	}
}

// TestRLQSFairShares: two instances with equal demand get equal shares
// summing to the budget; a demand shift moves the shares; when one
// disconnects, its share returns to the other.
func TestRLQSFairShares(t *testing.T) {
	const bucket = "api_key=k1,tier=free"
	for name, start := range rlqsBackends(t, rlqsConfigFile(t)) {
		t.Run(name, func(t *testing.T) {
			pa, pb := start(t)
			a, b := newEnvoy(t, pa, "edge"), newEnvoy(t, pb, "edge")
			// Equal demand, 60 a minute each (one report can claim at most
			// the budget's rate, 100 a minute; together they are above
			// it): 5 + 45 each.
			a.report(bucket, 60, 0, time.Minute)
			a.share(bucket, 100)
			b.report(bucket, 60, 0, time.Minute)
			b.share(bucket, 50)
			a.report(bucket, 60, 0, time.Minute)
			a.share(bucket, 50)

			// A's demand rises to 90, B's falls to 30: the shares follow
			// the demand (B's below half, A's above) and still add up to at
			// most the budget. (The exact split depends on how long each
			// report's demand is kept, server/rlqs' own tests pin it.)
			type act = *rlqsv3.RateLimitQuotaResponse_BucketAction
			a.report(bucket, 75, 15, time.Minute)
			b.report(bucket, 24, 6, time.Minute)
			b.waitFor(bucket, "a share below half", func(x act) bool { s := shareOf(x); return s >= 5 && s < 50 })
			a.report(bucket, 75, 15, time.Minute)
			a.waitFor(bucket, "a share above half", func(x act) bool { return shareOf(x) > 50 })
			a.mu.Lock()
			sa := shareOf(a.latest[bucket])
			a.mu.Unlock()
			// B's next assignment leaves A's share room: the two in force
			// add up to at most the budget.
			b.report(bucket, 24, 6, time.Minute)
			b.waitFor(bucket, "a share within what A leaves", func(x act) bool { s := shareOf(x); return s >= 5 && s+sa <= 100 })

			// B disconnects: A's next assignment is the whole budget
			// (pushed at once on one replica, at A's next report across
			// replicas).
			b.cancel()
			<-b.ended
			deadline := time.Now().Add(10 * time.Second)
			for {
				a.report(bucket, 75, 15, time.Minute)
				a.mu.Lock()
				got := shareOf(a.latest[bucket])
				a.mu.Unlock()
				if got == 100 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("A's share after B left: %d, want 100", got)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestRLQSReload: a config reload changes the assignment on an open stream
// without a report, and a removed entry is abandoned.
func TestRLQSReload(t *testing.T) {
	cfg := rlqsConfigFile(t)
	p := startServe(t, "--config", cfg)
	e := newEnvoy(t, p, "edge")
	// 10 requests a second: twice that over a minute (the cap) is above
	// both budgets.
	e.report("api_key=k1,tier=free", 10, 0, time.Second)
	e.share("api_key=k1,tier=free", 100)
	e.report("tier=banned", 0, 1, time.Second)
	e.share("tier=banned", -1)

	writeConfig(t, cfg, strings.Replace(rlqsConfig, "requests_per_unit: 100", "requests_per_unit: 300", 1))
	// Without a report the share follows the new budget, as far as the
	// demand last reported (at most the old budget's rate) lets it.
	e.waitFor("api_key=k1,tier=free", "a share above the old budget", func(x *rlqsv3.RateLimitQuotaResponse_BucketAction) bool {
		s := shareOf(x)
		return s > 100 && s <= 300
	})

	// The banned entry goes: the bucket is abandoned; the free one turns
	// into a ban.
	writeConfig(t, cfg, `domain: edge
quota_buckets:
  - bucket_id: {tier: free, api_key: "*"}
    blanket_rule: deny_all
`)
	e.share("tier=banned", -3)
	e.share("api_key=k1,tier=free", -1)
}

// TestRLQSDrain: on SIGTERM an open stream gets the current assignments
// again and ends with OK, and the server exits without waiting for the
// drain timeout.
func TestRLQSDrain(t *testing.T) {
	p := startServe(t, "--config", rlqsConfigFile(t), "--drain-timeout", "60s")
	e := newEnvoy(t, p, "edge")
	e.report("api_key=k1,tier=free", 1, 0, time.Second)
	e.share("api_key=k1,tier=free", 100)
	start := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("SIGTERM took %v with an open stream", d)
	}
	<-e.ended
	if !errors.Is(e.end, io.EOF) {
		t.Errorf("stream ended with %v, want OK (io.EOF)", e.end)
	}
	e.mu.Lock()
	n := e.count["api_key=k1,tier=free"]
	e.mu.Unlock()
	if n < 2 {
		t.Errorf("%d assignments for the bucket, want a final one on drain too", n)
	}
}

// TestRLQSBadInput: malformed reports end their stream with a status
// naming the field; the server keeps serving other streams.
func TestRLQSBadInput(t *testing.T) {
	p := startServe(t, "--config", rlqsConfigFile(t), "--quota-max-buckets-per-stream", "3", "--max-key-bytes", "64")
	usage := func(id map[string]string, d *durationpb.Duration) *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
		return &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqsv3.BucketId{Bucket: id}, TimeElapsed: d}
	}
	ok := map[string]string{"tier": "gold"}
	for _, tc := range []struct {
		name string
		msgs []*rlqsv3.RateLimitQuotaUsageReports
		code codes.Code
		want string
	}{
		{"no domain", []*rlqsv3.RateLimitQuotaUsageReports{{BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(ok, nil)}}},
			codes.InvalidArgument, "domain: empty"},
		{"empty bucket id", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(ok, nil), usage(nil, nil)}}},
			codes.InvalidArgument, "bucket_quota_usages[1].bucket_id: empty"},
		{"oversized value", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{"k": strings.Repeat("v", 65)}, nil)}}},
			codes.InvalidArgument, "bucket_quota_usages[0].bucket_id: value of key \"k\" is 65 bytes"},
		{"negative elapsed", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(ok, durationpb.New(-time.Second))}}},
			codes.InvalidArgument, "bucket_quota_usages[0].time_elapsed: negative"},
		{"absurd elapsed", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(ok, durationpb.New(1000*time.Hour))}}},
			codes.InvalidArgument, "bucket_quota_usages[0].time_elapsed: 1000h0m0s is longer than 24h0m0s"},
		{"other domain later", []*rlqsv3.RateLimitQuotaUsageReports{
			{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(ok, nil)}},
			{Domain: "other", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(ok, nil)}}},
			codes.InvalidArgument, "domain: \"other\" differs from the stream's domain \"edge\""},
		{"too many buckets", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			usage(map[string]string{"b": "1"}, nil), usage(map[string]string{"b": "2"}, nil), usage(map[string]string{"b": "3"}, nil), usage(map[string]string{"b": "4"}, nil)}}},
			codes.ResourceExhausted, "bucket_quota_usages[3].bucket_id: the stream already has 3 buckets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := rlqsv3.NewRateLimitQuotaServiceClient(p.Conn(t)).StreamRateLimitQuotas(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.msgs {
				_ = s.Send(m) // may fail once the server has ended the stream
			}
			for {
				_, err = s.Recv()
				if err != nil {
					break
				}
			}
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Errorf("stream ended with %v, want %v containing %q", err, tc.code, tc.want)
			}
		})
	}
	// The server is unaffected.
	e := newEnvoy(t, p, "edge")
	e.report("api_key=k,tier=free", 1, 0, time.Second)
	e.share("api_key=k,tier=free", 100)
}
