package httpapi_test

import (
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/httpapi"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestLeakyWaitOverHTTP: POST /v1/check carries the leaky bucket's wait,
// and its headers describe the queue like a token bucket (q = the queue's
// size, w = the time it takes to drain).
func TestLeakyWaitOverHTTP(t *testing.T) {
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	rl := server.NewRateLimiter(st, server.CheckSettings{Settings: server.Settings{Clock: testkit.NewClock(testkit.T0).Now}})
	srv := serve(t, rl, httpapi.Settings{})
	body := `{"key":"partner","algorithm":"ALGORITHM_LEAKY_BUCKET","limit":{"requests":20,"period":"1s","burst":4}}`
	for i, want := range []string{`"wait":"0s"`, `"wait":"0.050s"`, `"wait":"0.100s"`} {
		resp, got := postJSON(t, srv, httpapi.PathCheck, "", body)
		if resp.StatusCode != 200 || !strings.Contains(got, want) || !strings.Contains(got, `"allowed":true`) {
			t.Fatalf("check %d: %d %s, want 200, allowed, %s", i, resp.StatusCode, got, want)
		}
		if i == 0 {
			if p := resp.Header.Get("RateLimit-Policy"); p != `"inline";q=4;w=1` {
				t.Errorf("RateLimit-Policy %q, want q=4 (the queue) and w=1 (200ms to drain, rounded up)", p)
			}
		}
	}
}
