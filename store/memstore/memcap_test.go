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
// bound each, EntryBytes of a 10,000-slot ring (80 KB and change), on the
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
	bound := EntryBytes(algorithms.SlidingWindowLog, "tenant:00", int(algorithms.MaxLogRequests))
	t.Logf("%d full logs: %d bytes of heap (%d a key), %d accounted; bound %d a key", keys, heap, heap/keys, s.Bytes(), bound)
	if s.Len() != keys {
		t.Fatalf("Len %d, want %d", s.Len(), keys)
	}
	// 64 KiB of slack for what the runtime itself allocates meanwhile.
	if heap > keys*bound+64<<10 {
		t.Errorf("heap grew by %d bytes for %d full logs, %d a key; want at most %d a key", heap, keys, heap/keys, bound)
	}
	if got := s.Bytes(); got > keys*bound {
		t.Errorf("accounted %d bytes, want at most %d", got, keys*bound)
	}
}

// TestMemoryCap: with MaxBytes set, filling 64 full logs keeps the store
// under the cap by its own accounting at every step, and on the heap; the
// newest logs are kept whole and decide exactly.
func TestMemoryCap(t *testing.T) {
	const maxBytes = 2 << 20
	before := heapAlloc()
	s := New(Config{MaxBytes: maxBytes, SweepInterval: -1})
	defer s.Close()
	peak := int64(0)
	for k := range 64 {
		fillLogKey(t, s, fmt.Sprintf("tenant:%02d", k), t0.Add(time.Duration(k)*10*time.Second), time.Millisecond)
		got := s.Bytes()
		peak = max(peak, got)
		if got > maxBytes {
			t.Fatalf("after %d full logs: %d bytes accounted, above the cap %d", k+1, got, maxBytes)
		}
	}
	heap := heapAlloc() - before
	runtime.KeepAlive(s)
	t.Logf("64 full logs under a %d-byte cap: %d keys kept, %d bytes accounted (peak %d), heap +%d", maxBytes, s.Len(), s.Bytes(), peak, heap)
	if s.Len() < 8 || s.Len() >= 64 {
		t.Errorf("Len %d, want some but not all of the 64 logs kept", s.Len())
	}
	if heap > maxBytes*5/4 {
		t.Errorf("heap grew by %d bytes, more than the cap %d and a quarter", heap, maxBytes)
	}
	// The last key filled is whole: full now, one unit back after its
	// first unit leaves.
	now := t0.Add(630*time.Second + fullLog.Period - time.Millisecond)
	d := decide(t, s, now, store.Request{Key: "tenant:63", Limit: fullLog, Cost: 1})[0]
	if d.Allowed || d.RetryAfter != time.Millisecond {
		t.Errorf("full log: %+v, want a deny for 1ms", d)
	}
	if d := decide(t, s, now.Add(time.Millisecond), store.Request{Key: "tenant:63", Limit: fullLog, Cost: 2})[0]; d.Allowed || d.RetryAfter != time.Millisecond {
		t.Errorf("full log, 2 units once 1 left: %+v, want a deny for 1ms more", d)
	}
}

// TestEntryBytes holds EntryBytes to the heap: the accounting must not
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
		before := heapAlloc()
		s := New(Config{MaxBytes: 1 << 40, Shards: 1, SweepInterval: -1})
		for k := range tc.keys {
			key := fmt.Sprintf("user:%08d", k)
			if tc.fill {
				fillLogKey(t, s, key, t0, time.Millisecond)
			} else {
				decide(t, s, t0, store.Request{Key: key, Limit: tc.l, Cost: 1})
			}
		}
		heap := heapAlloc() - before
		acct := s.Bytes()
		runtime.KeepAlive(s)
		s.Close()
		t.Logf("%s, %d keys: heap %.1f bytes a key, accounted %.1f", tc.l.Algorithm, tc.keys, float64(heap)/float64(tc.keys), float64(acct)/float64(tc.keys))
		// 4 KiB of slack for what the runtime itself allocates meanwhile.
		if heap > acct+4<<10 || acct > 2*heap {
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
