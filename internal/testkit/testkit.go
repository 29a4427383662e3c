// Package testkit holds the few helpers that several packages' tests
// share: a clock the test moves by hand (starting at T0), a rules source
// the test controls, and builders for inline limits and Envoy descriptors.
// Only _test.go files import it.
package testkit

import (
	_ "embed"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/rules"
)

// T0 is the fixed epoch the tests' clocks start at: midnight UTC on
// 2000-01-01, a whole second, minute, hour and day.
var T0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a clock the test moves by hand; its methods may be called from
// several goroutines.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock reading at.
func NewClock(at time.Time) *Clock { return &Clock{now: at} }

// Now is the clock's time; pass the method value as a Clock func.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Rules is a rules source (an api.RuleSource) that changes only when the
// test calls Set.
type Rules struct {
	mu  sync.Mutex
	cfg *rules.Set
}

// StaticRules returns a Rules serving cfg.
func StaticRules(cfg *rules.Set) *Rules { return &Rules{cfg: cfg} }

// Current is the rules now served.
func (r *Rules) Current() *rules.Set {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg
}

// Set replaces the rules served.
func (r *Rules) Set(cfg *rules.Set) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cfg = cfg
}

// ParseRules parses yaml as a rules file named test.yaml, failing t if it
// does not parse.
func ParseRules(t testing.TB, yaml string) *rules.Set {
	t.Helper()
	cfg, err := rules.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Inline is a Check request's inline limit.
func Inline(requests int64, period time.Duration, burst int64) *floodgatev1.CheckRequest_Limit {
	return &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: requests, Period: durationpb.New(period), Burst: burst}}
}

// Descriptor builds an Envoy descriptor from key, value pairs.
func Descriptor(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// Eventually polls cond every 20ms until it holds, failing t with what
// after 10s.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// EnvoyRules is the Envoy rule file the API tests decide with (domain
// "edge": per-address limits with exact, wildcard and ban values, an
// unlimited key, a window without edges, shadow mode and a two-limit
// plan), in testdata/envoy_rules.yaml.
//
//go:embed testdata/envoy_rules.yaml
var EnvoyRules string
