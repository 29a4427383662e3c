package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/internal/redistest"
)

// windowRules: a 2/second limit, and a 1/minute quota of quota mode.
const windowRules = `domain: win
descriptors:
  - key: sec
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: svc
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// TestReferenceWindowsStartAfresh: started from the reference's
// environment, which counts denied hits, a fixed window still starts
// afresh at its boundary: a client that sent 6 requests in a second to a
// 2/second limit is admitted twice the next second, and no answer says a
// window of 1 s resets more than 1 s later; an over-quota descriptor of a
// 1/minute quota says the time left in its minute.
func TestReferenceWindowsStartAfresh(t *testing.T) {
	backends := []struct {
		name string
		env  func(t *testing.T) map[string]string
	}{
		{"embedded", func(t *testing.T) map[string]string { return map[string]string{"BACKEND_TYPE": "memory"} }},
		{"redis", func(t *testing.T) map[string]string {
			r := redistest.StartServer(t)
			// Room for a busy machine: the answers checked are the Redis
			// server's, never a failure mode's (allowed, counted nowhere).
			return map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": r.Addr(), "REDIS_TIMEOUT": "5s"}
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			p := startAsReference(t, referenceEnv(t, map[string]string{"win.yaml": windowRules}, b.env(t)))
			c := rlsClient(t, p.GRPCAddr)
			call := func(kv ...string) windowStatus {
				t.Helper()
				resp, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "win", HitsAddend: 1, Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc(kv...)}})
				if err != nil {
					t.Fatal(err)
				}
				s := resp.GetStatuses()[0]
				return windowStatus{s.GetCode().String(), s.GetDurationUntilReset().AsDuration()}
			}
			t.Run("second", func(t *testing.T) {
				for attempt := 0; ; attempt++ {
					key := fmt.Sprintf("client-%d", attempt)
					sec := waitForSecond()
					var got []windowStatus
					for range 6 {
						got = append(got, call("sec", key))
					}
					if time.Now().Unix() != sec { // the burst straddled a boundary: again
						if attempt == 5 {
							t.Fatal("6 calls never fitted in one second")
						}
						continue
					}
					for i, g := range got {
						want := "OVER_LIMIT"
						if i < 2 {
							want = "OK"
						}
						if g.code != want || g.reset > time.Second {
							t.Errorf("call %d in the first second: %v, want %s with a reset within 1s", i+1, g, want)
						}
					}
					waitForSecond()
					for i := range 2 {
						if g := call("sec", key); g.code != "OK" || g.reset > time.Second {
							t.Errorf("call %d in the next second: %v, want OK within 1s (the window starts afresh)", i+1, g)
						}
					}
					return
				}
			})
			t.Run("quota", func(t *testing.T) {
				for attempt := 0; ; attempt++ {
					key := fmt.Sprintf("s-%d", attempt)
					minute := time.Now().Truncate(time.Minute)
					var got []windowStatus
					for range 4 {
						got = append(got, call("svc", key))
					}
					if !time.Now().Truncate(time.Minute).Equal(minute) { // the calls straddled a minute: again
						if attempt == 2 {
							t.Fatal("4 calls never fitted in one minute")
						}
						continue
					}
					if got[0].code != "OK" {
						t.Fatalf("first call: %v, want OK", got[0])
					}
					for i, g := range got[1:] {
						if g.code != "OVER_LIMIT" || g.reset > time.Minute {
							t.Errorf("over-quota call %d: %v, want OVER with a reset within the minute", i+1, g)
						}
					}
					return
				}
			})
		})
	}
}

// waitForSecond sleeps until 20 ms past the next second boundary and
// returns that second (Unix).
func waitForSecond() int64 {
	now := time.Now()
	next := now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond)
	time.Sleep(next.Sub(now))
	return next.Unix()
}

// windowStatus is one status of an answer: its code and duration_until_reset.
type windowStatus struct {
	code  string
	reset time.Duration
}
