package redisstore_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// TestStalledRedisDecidesOnce: a Redis that stalls longer than the
// client's read timeout, but less than the store's Timeout, still runs
// the decision sent to it once it wakes; NewClient's client does not
// send it again after the failed read (nor after a reset connection),
// since Redis would run both: two charges, or two refunds, for one
// request, whatever the caller was answered. Batched and not.
func TestStalledRedisDecidesOnce(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, batch := range []int{1, 0} {
		c, err := redisstore.NewClient(redisstore.ClientConfig{URL: "redis://" + srv.Addr(), ReadTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s := newStore(t, c, redisstore.Config{Timeout: 3 * time.Second, BatchMaxSize: batch})
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Hour}
		key := "stall" + string(rune('a'+batch))
		decide(t, s, time.Now(), store.Request{Key: "stall-warm", Limit: l, Cost: 1})
		if err := syscall.Kill(srv.PID(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		woken := make(chan struct{})
		go func() {
			defer close(woken)
			time.Sleep(600 * time.Millisecond) // the read times out, and a retry would be sent, meanwhile
			syscall.Kill(srv.PID(), syscall.SIGCONT)
		}()
		out := make([]algorithms.Decision, 1)
		err = s.Decide(context.Background(), time.Now(), []store.Request{{Key: key, Limit: l, Cost: 1}}, out)
		<-woken
		time.Sleep(200 * time.Millisecond) // what Redis holds queued runs
		look := decide(t, s, time.Now(), store.Request{Key: key, Limit: l})[0]
		if look.Remaining < 9 {
			t.Errorf("batch size %d: one charge of 1 (answered %+v, %v) left %d of 10", batch, out[0], err, look.Remaining)
		}
		s.Close()
		c.Close()
	}
}
