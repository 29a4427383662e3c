package httpapi_test

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/internal/ratelimitheader"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/httpapi"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestWarningHeader: the HTTP door answers RateLimit-Warning on an
// allowed check at or above the limit's warning threshold (a policy's
// warn_at, an inline limit's warnAt), and never on a deny; a batch lists
// every check that warns.
func TestWarningHeader(t *testing.T) {
	cfg := testkit.ParseRules(t, "policies:\n  p: {requests: 4, period: 1m, warn_at: 75%}\n  q: {requests: 4, period: 1m, warn_at: 1}\n")
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	rules := testkit.StaticRules(cfg)
	srv := serve(t, server.NewRateLimiter(st, server.CheckSettings{Settings: server.Settings{Rules: rules}}), httpapi.Settings{Rules: rules})

	for i, want := range []string{"", "", `"p";at=3`, `"p";at=3`, ""} {
		resp, body := postJSON(t, srv, httpapi.PathCheck, "", `{"key":"k","policy":"p"}`)
		if got := resp.Header.Get(ratelimitheader.WarningName); got != want {
			t.Fatalf("policy check %d: RateLimit-Warning %q, want %q (%s)", i+1, got, want, body)
		}
	}
	for i, want := range []string{"", `"inline";at=2`} {
		resp, body := postJSON(t, srv, httpapi.PathCheck, "", `{"key":"k","algorithm":"ALGORITHM_FIXED_WINDOW","limit":{"requests":3,"period":"60s","warnAt":2}}`)
		if got := resp.Header.Get(ratelimitheader.WarningName); got != want {
			t.Fatalf("inline check %d: RateLimit-Warning %q, want %q (%s)", i+1, got, want, body)
		}
	}
	batch := func(cost int) string {
		return fmt.Sprintf(`{"checks":[{"key":"b","policy":"q"},{"key":"b","policy":"p","cost":%d}]}`, cost)
	}
	for i, tc := range []struct {
		cost int
		want string
	}{{1, `"q";at=1`}, {4, ""}, {2, `"q";at=1, "p";at=3`}} {
		resp, body := postJSON(t, srv, httpapi.PathCheckBatch, "", batch(tc.cost))
		if got := resp.Header.Get(ratelimitheader.WarningName); got != tc.want {
			t.Fatalf("batch %d: RateLimit-Warning %q, want %q (%s)", i+1, got, tc.want, body)
		}
	}
}
