package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// scriptCalls is how many FCALLs Redis has run.
func scriptCalls(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	info, err := srv.Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_fcall:") {
			continue
		}
		for _, f := range strings.Split(strings.SplitN(strings.TrimSpace(line), ":", 2)[1], ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				c, _ := strconv.ParseInt(v, 10, 64)
				n += c
			}
		}
	}
	return n
}

// TestBatchedCallsShareScripts: concurrent Decide calls queued together
// travel in one script call, each still all or nothing on its own, and
// exact: 200 concurrent single checks and 2-key batches against limits
// of 50 admit exactly 50 on the hot key, with fewer script calls than
// decisions.
func TestBatchedCallsShareScripts(t *testing.T) {
	srv := redistest.StartServer(t)
	s, err := redisstore.New(srv.Client(), redisstore.Config{BatchMaxSize: 64, BatchMaxWait: 2 * time.Millisecond, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hot := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 50, Period: time.Hour}
	before := scriptCalls(t, srv)
	var allowed, batches atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := []store.Request{{Key: "merge-hot", Limit: hot, Cost: 1}}
			if i%2 == 1 { // a batch: the hot key and a key of its own
				reqs = append(reqs, store.Request{Key: "merge-own-" + strconv.Itoa(i), Limit: hot, Cost: 1})
			}
			out := make([]algorithms.Decision, len(reqs))
			if err := s.Decide(context.Background(), time.Now(), reqs, out); err != nil {
				t.Error(err)
				return
			}
			if out[0].Allowed {
				allowed.Add(1)
				if len(reqs) == 2 {
					batches.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != 50 {
		t.Fatalf("admitted %d on the hot key, want exactly 50", allowed.Load())
	}
	calls := scriptCalls(t, srv) - before
	if calls >= 200 {
		t.Fatalf("%d script calls for 200 decisions: calls were not merged", calls)
	}
	// A batch denied on the hot key charged nothing on its own key.
	out := make([]algorithms.Decision, 1)
	charged := 0
	for i := 1; i < 200; i += 2 {
		if err := s.Decide(context.Background(), time.Now(), []store.Request{{Key: "merge-own-" + strconv.Itoa(i), Limit: hot, Cost: 0}}, out); err != nil {
			t.Fatal(err)
		}
		if out[0].Remaining == 49 {
			charged++
		}
	}
	t.Logf("%d script calls for 200 Decide calls; %d of 100 batches admitted", calls, charged)
	if int64(charged) != batches.Load() {
		t.Fatalf("%d own keys charged, but %d batches were admitted: a denied batch charged its own key", charged, batches.Load())
	}
}
