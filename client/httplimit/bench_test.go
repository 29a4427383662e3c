package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/httplimit"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// benchLimit never denies within a run, so every call is a charging check.
var benchLimit = client.Limit{Algorithm: algorithms.TokenBucket, Requests: 1_000_000_000, Period: time.Hour}

// BenchmarkMiddleware measures the middleware around an empty handler,
// per IP and per API key (one CheckBatch of two), distinct clients.
func BenchmarkMiddleware(b *testing.B) {
	addr, stop, err := floodgatetest.Serve(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	c, err := client.Dial(addr, client.WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	h := httplimit.Middleware(c, httplimit.Config{Limit: benchLimit, PerIPAndKey: true, FailureMode: client.FailClosed})(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := next.Add(1)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = "10." + strconv.FormatInt(n>>16&255, 10) + "." + strconv.FormatInt(n>>8&255, 10) + "." + strconv.FormatInt(n&255, 10) + ":1"
			r.Header.Set("X-API-Key", "key-"+strconv.FormatInt(n, 10))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Errorf("got %d, want 200", w.Code)
				return
			}
		}
	})
}
