package httplimit_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/httplimit"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// TestMiddlewareWarning: an allowed request at or above the limit's
// warning threshold gets RateLimit-Warning, below it and on a 429 none;
// with a key and an IP, every limit past its threshold is listed.
func TestMiddlewareWarning(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	h := httplimit.Middleware(c, httplimit.Config{
		Limit: client.Limit{Algorithm: algorithms.FixedWindow, Requests: 4, Period: time.Minute, WarnAtPercent: 50},
	})(ok)
	for i, want := range []string{"", `"ip";at=2`, `"ip";at=2`, `"ip";at=2`, ""} {
		w := get(h, "192.0.2.1:1")
		if got := w.Header().Get("RateLimit-Warning"); got != want {
			t.Fatalf("request %d: %d, RateLimit-Warning %q, want %q", i+1, w.Code, got, want)
		}
	}

	cfg := floodgatetest.StaticRules(t, "policies:\n  partner: {requests: 3, period: 1m, warn_at: 1}\n")
	paddr, _ := floodgatetest.Start(t, cfg)
	ph := httplimit.Middleware(floodgatetest.Dial(t, paddr), httplimit.Config{
		Limit:       client.Policy("partner"),
		IPLimit:     client.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Minute, WarnAt: 2},
		PerIPAndKey: true,
	})(ok)
	for i, want := range []string{`"partner";at=1`, `"partner";at=1, "ip";at=2`} {
		w := get(ph, "192.0.2.9:1", "X-API-Key", "k")
		if got := w.Header().Get("RateLimit-Warning"); w.Code != 200 || got != want {
			t.Fatalf("keyed request %d: %d, RateLimit-Warning %q, want 200, %q", i+1, w.Code, got, want)
		}
	}
}
