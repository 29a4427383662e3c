package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// keyRecorder remembers the store request of each limit seen, by the
// limit's requests per period, so a test can look at that limit's state.
type keyRecorder struct {
	store.Store
	mu   sync.Mutex
	seen map[int64]store.Request
}

func (k *keyRecorder) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	k.mu.Lock()
	for _, r := range reqs {
		k.seen[r.Limit.Requests] = r
	}
	k.mu.Unlock()
	return k.Store.Decide(ctx, now, reqs, out)
}

// remaining peeks the state of the limit of requests per period.
func (k *keyRecorder) remaining(t *testing.T, requests int64) int64 {
	t.Helper()
	k.mu.Lock()
	r, ok := k.seen[requests]
	k.mu.Unlock()
	if !ok {
		t.Fatalf("no store request for the limit of %d", requests)
	}
	r.Cost, r.DryRun, r.Mode = 0, true, 0
	out := make([]algorithms.Decision, 1)
	if err := k.Store.Decide(context.Background(), testkit.T0, []store.Request{r}, out); err != nil {
		t.Fatal(err)
	}
	return out[0].Remaining
}

// shadowRules: an enforced limit of 2 and a shadow one of 3 a minute, and
// a shadow ban (requests_per_unit: 0).
const shadowRules = `domain: edge
descriptors:
  - key: enforced
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: trial_ban
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 0}
`

// TestEnvoyShadowChargedOnlyWhenAllowed: a request matching an enforced
// and a shadow limit charges the shadow limit when it passes and not
// when the enforced limit denies it: after two passes and four denies,
// the shadow limit of 3 has spent 2.
func TestEnvoyShadowChargedOnlyWhenAllowed(t *testing.T) {
	rec := &keyRecorder{Store: memstore.New(memstore.Config{}), seen: map[int64]store.Request{}}
	h := startEnvoy(t, shadowRules, rec, server.EnvoySettings{})
	for i, want := range []string{"OK:OK,OK", "OK:OK,OK", "OVER_LIMIT:OVER_LIMIT,OK", "OVER_LIMIT:OVER_LIMIT,OK", "OVER_LIMIT:OVER_LIMIT,OK", "OVER_LIMIT:OVER_LIMIT,OK"} {
		if got := codesOf(h.call(t, testkit.Descriptor("enforced", "u"), testkit.Descriptor("trial", "u"))); got != want {
			t.Fatalf("call %d: %s, want %s", i, got, want)
		}
	}
	if got := rec.remaining(t, 3); got != 1 {
		t.Fatalf("the shadow limit of 3 has %d left, want 1 (charged by the two passes only)", got)
	}
}

// TestEnvoyShadowBanChargesEnforced: a shadow ban beside an enforced limit
// does not reject the request: the enforced limit is charged and decides.
func TestEnvoyShadowBanChargesEnforced(t *testing.T) {
	h := startEnvoy(t, shadowRules, nil, server.EnvoySettings{})
	for i, want := range []struct {
		codes     string
		remaining uint32
	}{{"OK:OK,OK", 1}, {"OK:OK,OK", 0}, {"OVER_LIMIT:OVER_LIMIT,OK", 0}} {
		r := h.call(t, testkit.Descriptor("enforced", "u"), testkit.Descriptor("trial_ban", "u"))
		if got := codesOf(r); got != want.codes || r.Statuses[0].GetLimitRemaining() != want.remaining {
			t.Fatalf("call %d: %s, %d remaining; want %s, %d remaining", i, got, r.Statuses[0].GetLimitRemaining(), want.codes, want.remaining)
		}
	}
}

// TestEnvoyServerLocalFailureCounted: with the server's failure mode
// local and a rule that sets none, a decision made by the local share
// while the store is down is counted result="local", not "degraded".
func TestEnvoyServerLocalFailureCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	yaml := "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 30}\n"
	h := startEnvoy(t, yaml, failingStore{memstore.New(memstore.Config{})}, server.EnvoySettings{
		Settings: server.Settings{FailureMode: rules.FailureLocal, Local: threeReplicas(), Metrics: observability.NewMetrics(reg)},
	})
	ok := 0
	for range 30 {
		if codesOf(h.call(t, testkit.Descriptor("k", "v"))) == "OK:OK" {
			ok++
		}
	}
	if ok != 10 {
		t.Errorf("%d of 30 OK, want 10 (a third of 30, by the local share)", ok)
	}
	results := decisionResults(t, reg)
	if results[observability.ResultLocal] != 30 || len(results) != 1 {
		t.Fatalf("decisions by result %v, want %q: 30", results, observability.ResultLocal)
	}
}

// decisionResults sums floodgate_decisions_total by result.
func decisionResults(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "floodgate_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
