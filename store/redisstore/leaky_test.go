package redisstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// 3 replicas (3 stores, each with its own client) on one
// Redis, 50 concurrent callers on one leaky bucket key at 20/s: the starts
// granted are exactly 50 ms apart.
const (
	leakyCallers  = 50
	leakyReplicas = 3
)

var leaky20 = algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 20, Period: time.Second, Burst: 100}

// leakyRun sends leakyCallers concurrent checks of one key through the
// replicas, caller i through replica i%3, and returns each admitted
// decision with the local times just before and after its call.
func leakyRun(t *testing.T, replicas []*redisstore.Store, key string, now time.Time) (waits []time.Duration, before, after []time.Time) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range leakyCallers {
		wg.Go(func() {
			out := make([]algorithms.Decision, 1)
			<-start
			b := time.Now()
			err := replicas[i%len(replicas)].Decide(context.Background(), now, []store.Request{{Key: key, Limit: leaky20, Cost: 1}}, out)
			a := time.Now()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("caller %d: %v", i, err)
			case !out[0].Allowed:
				t.Errorf("caller %d denied: %+v", i, out[0])
			default:
				waits, before, after = append(waits, out[0].Wait), append(before, b), append(after, a)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(waits) != leakyCallers {
		t.Fatalf("%d of %d callers admitted", len(waits), leakyCallers)
	}
	return waits, before, after
}

func leakyReplicaStores(t *testing.T, srv *redistest.Server, cfg redisstore.Config) []*redisstore.Store {
	var replicas []*redisstore.Store
	for range leakyReplicas {
		s := newStore(t, srv.Client(), cfg)
		t.Cleanup(func() { s.Close() })
		replicas = append(replicas, s)
	}
	return replicas
}

// TestLeakyReplicasPinnedNow: with the clients' time pinned, every start
// (now + wait) is distinct and the sorted starts are exactly 50 ms apart.
func TestLeakyReplicasPinnedNow(t *testing.T) {
	srv := redistest.StartServer(t)
	replicas := leakyReplicaStores(t, srv, testConfig())
	now := time.Date(2026, 11, 30, 17, 0, 0, 0, time.UTC)
	waits, _, _ := leakyRun(t, replicas, "leaky-pinned", now)
	slices.Sort(waits)
	for i, w := range waits {
		if want := time.Duration(i) * 50 * time.Millisecond; w != want {
			t.Fatalf("start %d of %d at now+%v, want now+%v: %v", i, leakyCallers, w, want, waits)
		}
	}
}

// TestLeakyReplicasRedisTime: the same on Redis' own clock (the default).
// Each start is the decision's time (between the local times around the
// call: Redis runs on this machine, with this clock) plus its wait; sorted,
// every gap's possible range holds 50 ms, so no two starts are closer than
// 50 ms minus their two calls' durations (the clock jitter).
func TestLeakyReplicasRedisTime(t *testing.T) {
	srv := redistest.StartServer(t)
	cfg := testConfig()
	cfg.ClientTime = false
	replicas := leakyReplicaStores(t, srv, cfg)
	waits, before, after := leakyRun(t, replicas, "leaky-redis-time", time.Time{})
	type span struct{ lo, hi time.Time }
	starts := make([]span, len(waits))
	var jitter time.Duration
	for i, w := range waits {
		// Redis' TIME is read in whole ms: the decision's ms lies in
		// [before truncated to the ms, after].
		starts[i] = span{before[i].Truncate(time.Millisecond).Add(w), after[i].Add(w)}
		jitter = max(jitter, starts[i].hi.Sub(starts[i].lo))
	}
	slices.SortFunc(starts, func(a, b span) int { return a.lo.Compare(b.lo) })
	const slot = 50 * time.Millisecond
	for i := 1; i < len(starts); i++ {
		// The true gap lies between the earliest and the latest the two
		// starts can be.
		longest, shortest := starts[i].hi.Sub(starts[i-1].lo), starts[i].lo.Sub(starts[i-1].hi)
		if shortest > slot || longest < slot {
			t.Errorf("starts %d and %d: gap in [%v, %v], which excludes %v (jitter %v)", i-1, i, shortest, longest, slot, jitter)
		}
	}
	total := starts[len(starts)-1].hi.Sub(starts[0].lo)
	if want := (leakyCallers - 1) * slot; total < want-jitter || total > want+2*jitter {
		t.Errorf("first to last start: %v, want %v (jitter %v)", total, want, jitter)
	}
	t.Logf("jitter (the longest call) %v", jitter)
}
