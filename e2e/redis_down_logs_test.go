package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// TestRedisDownAtStartLogs: floodgate started while its Redis is down logs
// the outage once ("store unreachable"), go-redis' own lines (one per
// failed dial, several a second, more under traffic) at most once a
// minute, and the recovery once.
func TestRedisDownAtStartLogs(t *testing.T) {
	r := redistest.StartServer(t)
	r.Kill()
	start := time.Now()
	p := startOnRedis(t, r, "--log-format", "json")
	c := p.Client(t)
	waitFor(t, 10*time.Second, "the outage logged", func() bool { return logLines(p, "store unreachable") > 0 })
	for i := range 50 { // light traffic while down
		if _, err := c.Check(context.Background(), policyCheck("open_p", fmt.Sprintf("down:%d", i))); err != nil {
			t.Fatalf("check while Redis is down: %v", err)
		}
	}
	r.Restart()
	firstHealthy(t, c, "open_p", time.Now(), 10*time.Second)
	waitFor(t, 10*time.Second, "the recovery logged", func() bool { return logLines(p, "store reachable again") > 0 })

	minutes := int(time.Since(start) / time.Minute)
	if n := logLines(p, `"msg":"go-redis"`); n < 1 || n > 1+minutes {
		t.Errorf("%d go-redis lines in %v, want 1 a minute at most (and the first)", n, time.Since(start).Round(time.Second))
	}
	if n := logLines(p, "store unreachable"); n != 1 {
		t.Errorf("%d \"store unreachable\" lines, want 1", n)
	}
	if n := logLines(p, "store reachable again"); n != 1 {
		t.Errorf("%d \"store reachable again\" lines, want 1", n)
	}
	if t.Failed() {
		t.Logf("the log:\n%s", p.logs.String())
	}
}
