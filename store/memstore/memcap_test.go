package memstore

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// fullLog is the largest sliding window log: MaxLogRequests per hour.
var fullLog = algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: algorithms.MaxLogRequests, Period: time.Hour}

// fillLogKey admits fullLog's 10,000 units into key, one every step from
// start (each unit at its own time: the old log's worst case).
func fillLogKey(tb testing.TB, s *Store, key string, start time.Time, step time.Duration) {
	tb.Helper()
	reqs := []store.Request{{Key: key, Limit: fullLog, Cost: 1}}
	out := make([]algorithms.Decision, 1)
	for i := range fullLog.Requests {
		if err := s.Decide(context.Background(), start.Add(time.Duration(i)*step), reqs, out); err != nil {
			tb.Fatal(err)
		}
		if !out[0].Allowed {
			tb.Fatalf("unit %d of %s denied: %+v", i, key, out[0])
		}
	}
}

// heapAlloc is the live heap after a GC.
func heapAlloc() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestFullLogMemory: 64 full sliding window logs (they once took
// ~22 MB, each admit copying the whole log) take at most the documented
// bound each, entryBytes of a 10,000-slot ring (80 KB and change), on the
// heap and in the store's own accounting.
func TestFullLogMemory(t *testing.T) {
	const keys = 64
	before := heapAlloc()
	// One shard: every shard's map has a fixed cost, not counted here.
	s := New(Config{Shards: 1, SweepInterval: -1})
	defer s.Close()
	for k := range keys {
		fillLogKey(t, s, fmt.Sprintf("tenant:%02d", k), t0, time.Millisecond)
	}
	heap := heapAlloc() - before
	runtime.KeepAlive(s)
	bound := entryBytes(algorithms.SlidingWindowLog, "tenant:00", int(algorithms.MaxLogRequests))
	t.Logf("%d full logs: %d bytes of heap (%d a key), %d accounted; bound %d a key", keys, heap, heap/keys, s.bytes(), bound)
	if s.Len() != keys {
		t.Fatalf("Len %d, want %d", s.Len(), keys)
	}
	// 64 KiB of slack for what the runtime itself allocates meanwhile.
	if heap > keys*bound+64<<10 {
		t.Errorf("heap grew by %d bytes for %d full logs, %d a key; want at most %d a key", heap, keys, heap/keys, bound)
	}
	if got := s.bytes(); got > keys*bound {
		t.Errorf("accounted %d bytes, want at most %d", got, keys*bound)
	}
}

// TestEntryBytes holds entryBytes to the heap: the accounting must not
// undercount (or the cap would not bound memory) nor overcount much.
func TestEntryBytes(t *testing.T) {
	for _, tc := range []struct {
		l    algorithms.Limit
		keys int
		fill bool
	}{
		{algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Minute}, 50_000, false},
		{algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 100, Period: time.Minute}, 20_000, false},
		{fullLog, 32, true},
	} {
		// The store's own fixed structures (its shard, the shard's empty
		// maps) are not entries: measure from after New.
		s := New(Config{MaxBytes: 1 << 40, Shards: 1, SweepInterval: -1})
		before := heapAlloc()
		for k := range tc.keys {
			key := fmt.Sprintf("user:%08d", k)
			if tc.fill {
				fillLogKey(t, s, key, t0, time.Millisecond)
			} else {
				decide(t, s, t0, store.Request{Key: key, Limit: tc.l, Cost: 1})
			}
		}
		heap := heapAlloc() - before
		acct := s.bytes()
		runtime.KeepAlive(s)
		s.Close()
		t.Logf("%s, %d keys: heap %.1f bytes a key, accounted %.1f", tc.l.Algorithm, tc.keys, float64(heap)/float64(tc.keys), float64(acct)/float64(tc.keys))
		// 16 KiB of slack for what the runtime itself allocates meanwhile
		// (a -race run on a loaded machine once showed 6 KB more heap than
		// the same run usually does): under 0.6% of the 32 full logs, a
		// third of a byte a key for the 50,000 counters.
		if heap > acct+16<<10 || acct > 2*heap {
			t.Errorf("%s: heap %d bytes, accounted %d: want heap <= accounted <= 2 × heap", tc.l.Algorithm, heap, acct)
		}
	}
}

// BenchmarkFullLog is one admit on a saturated sliding window log of
// 10,000 units in steady state: one unit every W/10,000, so the oldest
// unit leaves as one comes in.
func BenchmarkFullLog(b *testing.B) {
	s := New(Config{SweepInterval: -1})
	defer s.Close()
	step := fullLog.Period / time.Duration(fullLog.Requests)
	fillLogKey(b, s, "hot", t0, step)
	reqs := []store.Request{{Key: "hot", Limit: fullLog, Cost: 1}}
	out := make([]algorithms.Decision, 1)
	now := t0.Add(fullLog.Period - step)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(step)
		if err := s.Decide(context.Background(), now, reqs, out); err != nil || !out[0].Allowed {
			b.Fatalf("%+v, %v", out[0], err)
		}
	}
}
