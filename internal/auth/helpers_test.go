package auth_test

import (
	"sync"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/rules"
)

// Test helpers copied from other packages' tests (the old server package
// shared them), until one package of test helpers holds them.

// t0 is the fixed epoch of the tests' manual clock.
var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// manualClock is a clock the test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// staticConfig is a RuleSource that never changes.
type staticConfig struct{ cfg *rules.Set }

func (s staticConfig) Current() *rules.Set { return s.cfg }

func inline(requests int64, period time.Duration, burst int64) *floodgatev1.CheckRequest_Limit {
	return &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: requests, Period: durationpb.New(period), Burst: burst}}
}

const envoyConfig = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: remote_address
    value: 10.9.*
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: remote_address
    value: 10.6.6.6
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: internal
    rate_limit: {unlimited: true}
  - key: login
    rate_limit: {algorithm: sliding_window, period: 2s, requests_per_unit: 10}
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: plan
    value: free
    descriptors:
      - key: api_key
        rate_limits:
          - {name: free_per_second, algorithm: token_bucket, unit: second, requests_per_unit: 2, burst: 2}
          - {name: free_per_day, unit: day, requests_per_unit: 5}
`

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}
