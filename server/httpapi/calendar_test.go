package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/httpapi"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestCalendarJSON: the JSON API carries calendar limits (calendar,
// timeZone), answers with the wait until the next local boundary, and
// refuses a bad zone with 400 naming the field.
func TestCalendarJSON(t *testing.T) {
	jakarta, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2027, 2, 1, 0, 0, 0, 0, jakarta).Add(-90 * time.Second)
	rl := server.NewRateLimiter(memstore.New(memstore.Config{}), server.CheckSettings{Settings: server.Settings{Clock: func() time.Time { return now }}})
	srv := serve(t, rl, httpapi.Settings{})
	body := `{"key":"tenant:1","algorithm":"ALGORITHM_FIXED_WINDOW","cost":2,"limit":{"requests":2,"calendar":"CALENDAR_MONTH","timeZone":"Asia/Jakarta"}}`
	if resp, b := postJSON(t, srv, httpapi.PathCheck, "", body); resp.StatusCode != http.StatusOK || !strings.Contains(b, `"allowed":true`) {
		t.Fatalf("first: %d %s", resp.StatusCode, b)
	}
	resp, b := postJSON(t, srv, httpapi.PathCheck, "", body)
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusOK {
		t.Fatalf("second: %d %s", resp.StatusCode, b)
	}
	if !strings.Contains(b, `"allowed":false`) || !strings.Contains(b, `"retryAfter":"90s"`) || resp.Header.Get("Retry-After") != "90" {
		t.Fatalf("second: %s (Retry-After %q), want a deny for 90s", b, resp.Header.Get("Retry-After"))
	}
	bad := strings.Replace(body, "Asia/Jakarta", "Mars/Olympus", 1)
	if resp, b := postJSON(t, srv, httpapi.PathCheck, "", bad); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "limit.time_zone") {
		t.Fatalf("bad zone: %d %s, want 400 naming limit.time_zone", resp.StatusCode, b)
	}
}
