package client_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// benchLimit never denies within a run, so every call is a charging check.
var benchLimit = client.Limit{Algorithm: algorithms.TokenBucket, Requests: 1_000_000_000, Period: time.Hour}

// BenchmarkCheck measures one Check round trip over loopback TCP to an
// in-process floodgate, from parallel goroutines, each call a distinct
// key.
func BenchmarkCheck(b *testing.B) {
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
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			key := "bench:" + strconv.FormatInt(next.Add(1), 10)
			if d, err := c.Check(ctx, client.Request{Key: key, Limit: benchLimit}); err != nil || !d.Allowed || d.Remaining != benchLimit.Requests-1 {
				b.Errorf("got %+v, %v, want a first, allowed check of a fresh key", d, err)
				return
			}
		}
	})
}
