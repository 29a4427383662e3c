package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/internal/api"
)

// benchLimit never denies within a run, so every call is a charging check.
var benchLimit = client.Limit{Algorithm: client.TokenBucket, Requests: 1_000_000_000, Period: time.Hour}

// BenchmarkCheck measures one Check round trip over loopback TCP to an
// in-process floodgate, from parallel goroutines, each call a distinct
// key.
func BenchmarkCheck(b *testing.B) {
	addr, stop, err := serveFloodgate(api.Settings{})
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	c, err := client.Dial(addr, client.WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			key := "bench:" + strconv.FormatInt(next.Add(1), 10)
			if d, err := c.Check(ctx, key, benchLimit); err != nil || !d.Allowed || d.Remaining != benchLimit.Requests-1 {
				b.Errorf("got %+v, %v, want a first, allowed check of a fresh key", d, err)
				return
			}
		}
	})
}

// BenchmarkMiddleware measures the middleware around an empty handler,
// per IP and per API key (one CheckBatch of two), distinct clients.
func BenchmarkMiddleware(b *testing.B) {
	addr, stop, err := serveFloodgate(api.Settings{})
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	c, err := client.Dial(addr, client.WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	h := client.Middleware(c, client.HTTPConfig{Limit: benchLimit, PerIPAndKey: true, FailureMode: client.FailClosed})(
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
