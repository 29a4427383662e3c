package memstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/storetest"
)

var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return New(Config{})
	})
}

// TestConformanceFewShards runs the suite with two shards and a cap far above
// what it stores, so the multi-key paths share shards.
func TestConformanceFewShards(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return New(Config{Shards: 2, MaxKeys: 10_000, SweepInterval: -1})
	})
}

func decide(t *testing.T, s *Store, now time.Time, reqs ...store.Request) []algorithms.Decision {
	t.Helper()
	out := make([]algorithms.Decision, len(reqs))
	if err := s.Decide(context.Background(), now, reqs, out); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return out
}

func remaining(t *testing.T, s *Store, now time.Time, l algorithms.Limit, key string) int64 {
	t.Helper()
	return decide(t, s, now, store.Request{Key: key, Limit: l})[0].Remaining
}

func TestConfig(t *testing.T) {
	tests := []struct {
		cfg          Config
		wantShards   int
		wantMax      int
		wantMaxBytes int64
	}{
		{Config{}, DefaultShards, DefaultMaxKeys, DefaultMaxBytes},
		{Config{Shards: 100}, 128, DefaultMaxKeys, DefaultMaxBytes},
		{Config{Shards: 1}, 1, DefaultMaxKeys, DefaultMaxBytes},
		{Config{Shards: -5, MaxKeys: -1, MaxBytes: -1}, DefaultShards, DefaultMaxKeys, DefaultMaxBytes},
		{Config{Shards: 1 << 20, MaxBytes: 1 << 40}, MaxShards, DefaultMaxKeys, 1 << 40},
		// The memory cap lowers the shards to 512 KiB each at least.
		{Config{Shards: 1 << 20}, DefaultMaxBytes / minShardBytes, DefaultMaxKeys, DefaultMaxBytes},
		{Config{MaxBytes: 3 << 20}, 4, DefaultMaxKeys, 3 << 20},
		{Config{MaxBytes: 1000}, 2, DefaultMaxKeys, MinMaxBytes},
		{Config{MaxKeys: 1000}, 256, 1000, DefaultMaxBytes},
		{Config{MaxKeys: 10}, 8, 10, DefaultMaxBytes},
		{Config{MaxKeys: 1}, 1, 1, DefaultMaxBytes},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%+v", tc.cfg), func(t *testing.T) {
			s := New(tc.cfg)
			defer s.Close()
			if len(s.shards) != tc.wantShards {
				t.Errorf("shards %d, want %d", len(s.shards), tc.wantShards)
			}
			total, least := 0, tc.wantMax
			var totalBytes int64
			for i := range s.shards {
				total += s.shards[i].max
				least = min(least, s.shards[i].max)
				totalBytes += s.shards[i].maxBytes
			}
			if total != tc.wantMax || least < 1 {
				t.Errorf("shard caps sum to %d (smallest %d), want %d (smallest >= 1)", total, least, tc.wantMax)
			}
			if totalBytes != tc.wantMaxBytes {
				t.Errorf("shard memory caps sum to %d, want %d", totalBytes, tc.wantMaxBytes)
			}
		})
	}
}

func TestInvalidRequests(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	ctx := context.Background()
	bad := []algorithms.Limit{
		{},
		{Algorithm: algorithms.TokenBucket, Requests: 0, Period: time.Second},
		{Algorithm: algorithms.FixedWindow, Requests: 1, Period: 0},
		{Algorithm: algorithms.Algorithm(9), Requests: 1, Period: time.Second},
	}
	for _, l := range bad {
		out := make([]algorithms.Decision, 2)
		reqs := []store.Request{{Key: "ok", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Period: time.Second}, Cost: 1}, {Key: "bad", Limit: l, Cost: 1}}
		err := s.Decide(ctx, t0, reqs, out)
		if !errors.Is(err, store.ErrInvalid) || !errors.Is(err, algorithms.ErrInvalidLimit) {
			t.Errorf("Decide with limit %+v: %v, want an error wrapping store.ErrInvalid and algorithms.ErrInvalidLimit", l, err)
		}
	}
	if s.Len() != 0 {
		t.Errorf("Len %d after rejected calls, want 0", s.Len())
	}
	if err := s.Reset(ctx, algorithms.Algorithm(9), "k"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Reset with algorithm 9: %v, want store.ErrInvalid", err)
	}
}

func TestClose(t *testing.T) {
	for _, interval := range []time.Duration{0, -1} {
		s := New(Config{SweepInterval: interval})
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		ctx := context.Background()
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Period: time.Second}
		err := s.Decide(ctx, t0, []store.Request{{Key: "k", Limit: l, Cost: 1}}, make([]algorithms.Decision, 1))
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Decide after Close: %v, want store.ErrUnavailable", err)
		}
		if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Ping after Close: %v, want store.ErrUnavailable", err)
		}
		if err := s.Reset(ctx, algorithms.Unspecified, "k"); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Reset after Close: %v, want store.ErrUnavailable", err)
		}
	}
}

func TestConcurrentClose(t *testing.T) {
	s := New(Config{SweepInterval: time.Millisecond})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
}

func TestPingCancelled(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Ping(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ping with a cancelled context: %v, want context.Canceled", err)
	}
	if err := s.Reset(ctx, algorithms.TokenBucket, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Reset with a cancelled context: %v, want context.Canceled", err)
	}
}

// TestExpiredKeyIsGone: past its TTL a key is treated as absent and
// removed when touched; a refund back to full deletes it at once (but
// for the leaky bucket, whose give-back frees nothing).
func TestExpiredKeyIsGone(t *testing.T) {
	s := New(Config{SweepInterval: -1})
	defer s.Close()
	for _, alg := range algorithms.All() {
		l := algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Second}
		d := decide(t, s, t0, store.Request{Key: "k", Limit: l, Cost: 3})[0]
		if s.Len() != 1 {
			t.Fatalf("%v: Len %d after a charge, want 1", alg, s.Len())
		}
		if got := remaining(t, s, t0.Add(d.TTL-time.Millisecond), l, "k"); got == 10 || s.Len() != 1 {
			t.Errorf("%v 1ms before the TTL: Remaining %d, Len %d; want the charge kept", alg, got, s.Len())
		}
		if got := remaining(t, s, t0.Add(d.TTL), l, "k"); got != 10 || s.Len() != 0 {
			t.Errorf("%v at the TTL: Remaining %d, Len %d; want 10 and the key gone", alg, got, s.Len())
		}

		if alg == algorithms.LeakyBucket {
			continue // a give-back frees none of a queue's slots
		}
		decide(t, s, t0, store.Request{Key: "r", Limit: l, Cost: 2})
		decide(t, s, t0, store.Request{Key: "r", Limit: l, Cost: -2})
		if s.Len() != 0 {
			t.Errorf("%v: Len %d after a refund back to full, want 0", alg, s.Len())
		}
	}
}

func TestSweep(t *testing.T) {
	s := New(Config{Shards: 4, SweepInterval: -1})
	defer s.Close()
	short := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Second}
	long := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: time.Hour}
	for i := range 100 {
		decide(t, s, t0, store.Request{Key: fmt.Sprint("short-", i), Limit: short, Cost: 1})
		decide(t, s, t0, store.Request{Key: fmt.Sprint("long-", i), Limit: long, Cost: 1})
	}
	if n := s.Len(); n != 200 {
		t.Fatalf("Len %d, want 200", n)
	}
	if n := s.sweep(t0.Add(999 * time.Millisecond)); n != 0 {
		t.Errorf("Sweep before any TTL removed %d, want 0", n)
	}
	if n := s.sweep(t0.Add(time.Second)); n != 100 {
		t.Errorf("Sweep after the short TTL removed %d, want 100", n)
	}
	if n := s.Len(); n != 100 {
		t.Errorf("Len %d after the sweep, want 100", n)
	}
	if got := remaining(t, s, t0.Add(time.Second), long, "long-7"); got != 9 {
		t.Errorf("a key with time left: Remaining %d after the sweep, want 9", got)
	}
}

// TestBackgroundSweeper: the sweeper removes expired keys nobody touches,
// judging time by the newest now seen.
func TestBackgroundSweeper(t *testing.T) {
	s := New(Config{SweepInterval: time.Millisecond})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second}
	for i := range 50 {
		decide(t, s, t0, store.Request{Key: fmt.Sprint("idle-", i), Limit: l, Cost: 1})
	}
	// Wall-clock time is far past t0, but the store follows its callers'
	// clock: nothing has expired yet.
	time.Sleep(20 * time.Millisecond)
	if n := s.Len(); n != 50 {
		t.Fatalf("Len %d before the callers' clock moved, want 50", n)
	}
	decide(t, s, t0.Add(time.Hour), store.Request{Key: "active", Limit: l, Cost: 1})
	deadline := time.Now().Add(10 * time.Second)
	for s.Len() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Len %d ten seconds after the keys expired, want 1 (the active key)", s.Len())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKeyCap: the store never holds more than MaxKeys entries; a call
// that needs a new entry in a full shard is refused with ErrUnavailable.
func TestKeyCap(t *testing.T) {
	const maxKeys = 64
	s := New(Config{MaxKeys: maxKeys, Shards: 4, SweepInterval: -1})
	defer s.Close()
	now := t0
	for i := range 2000 {
		alg := algorithms.All()[i%len(algorithms.All())]
		l := algorithms.Limit{Algorithm: alg, Requests: 100, Period: time.Minute}
		reqs := []store.Request{{Key: fmt.Sprint("k", i), Limit: l, Cost: 1}}
		if i%3 == 0 {
			reqs = append(reqs, store.Request{Key: fmt.Sprint("j", i), Limit: l, Cost: 1})
		}
		out := make([]algorithms.Decision, len(reqs))
		err := s.Decide(context.Background(), now, reqs, out)
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("request %d: %v", i, err)
		}
		for _, d := range out {
			if err == nil && !d.Allowed {
				t.Fatalf("request %d denied on a fresh key", i)
			}
		}
		if n := s.Len(); n > maxKeys {
			t.Fatalf("Len %d after %d inserts, want at most %d", n, i+1, maxKeys)
		}
		now = now.Add(7 * time.Millisecond)
	}
	if n := s.Len(); n < maxKeys-len(s.shards) {
		t.Errorf("Len %d at the end, want the cap (%d) nearly used", n, maxKeys)
	}
}

// TestEvictExpiredFirst: a full shard drops expired entries before
// evicting live ones.
func TestEvictExpiredFirst(t *testing.T) {
	s := New(Config{MaxKeys: 4, Shards: 1, SweepInterval: -1})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 60, Period: time.Minute}
	for i, c := range []int64{1, 50, 2, 40} { // keys 0 and 2 are full again within 2s
		decide(t, s, t0, store.Request{Key: fmt.Sprint("k", i), Limit: l, Cost: c})
	}
	later := t0.Add(10 * time.Second)
	decide(t, s, later, store.Request{Key: "new", Limit: l, Cost: 1})
	// The sweep on insert may drop one or both expired entries; either way
	// no live entry is evicted.
	if n := s.Len(); n > 4 {
		t.Errorf("Len %d, want at most 4", n)
	}
	if n := s.sweep(later); s.Len() != 3 {
		t.Errorf("Len %d after sweeping %d, want 3 (k1, k3, new)", s.Len(), n)
	}
	if got := remaining(t, s, later, l, "new"); got != 59 {
		t.Errorf("new: Remaining %d, want 59", got)
	}
	if got := remaining(t, s, later, l, "k1"); got != 20 {
		t.Errorf("k1: Remaining %d, want 20 (kept)", got)
	}
	if got := remaining(t, s, later, l, "k3"); got != 30 {
		t.Errorf("k3: Remaining %d, want 30 (kept)", got)
	}
}

// TestBatchContentionExact: batches over keys in different shards, locked
// in opposite request orders, admit exactly the limit.
func TestBatchContentionExact(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	k1 := "a"
	k2 := ""
	for i := 0; k2 == ""; i++ {
		if k := fmt.Sprint("b", i); s.shardIndex(k) != s.shardIndex(k1) {
			k2 = k
		}
	}
	for _, alg := range algorithms.All() {
		l := algorithms.Limit{Algorithm: alg, Requests: 100, Period: time.Hour}
		var admitted, next atomic.Int64
		var wg sync.WaitGroup
		for g := range 64 {
			wg.Go(func() {
				reqs := []store.Request{{Key: k1, Limit: l, Cost: 1}, {Key: k2, Limit: l, Cost: 1}}
				if g%2 == 1 {
					reqs[0], reqs[1] = reqs[1], reqs[0]
				}
				out := make([]algorithms.Decision, 2)
				for next.Add(1) <= 300 {
					if err := s.Decide(context.Background(), t0, reqs, out); err != nil {
						t.Errorf("Decide: %v", err)
						return
					}
					if out[0].Allowed != out[1].Allowed {
						t.Errorf("the two keys disagree: %v %v", out[0].Allowed, out[1].Allowed)
					}
					if out[0].Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got := admitted.Load(); got != 100 {
			t.Errorf("%v: admitted %d batches, want exactly 100", alg, got)
		}
		for _, k := range []string{k1, k2} {
			if got := remaining(t, s, t0, l, k); got != 0 {
				t.Errorf("%v key %q: Remaining %d, want 0", alg, k, got)
			}
		}
	}
}

// TestDryRunInBatch pins the memstore's rule for DryRun requests mixed with
// charging ones: decided against the admitted charges before them, never
// charged, never seen by later requests, and their deny vetoes the call.
func TestDryRunInBatch(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute}

	out := decide(t, s, t0,
		store.Request{Key: "a", Limit: l, Cost: 2},
		store.Request{Key: "a", Limit: l, Cost: 3, DryRun: true},
		store.Request{Key: "a", Limit: l, Cost: 3})
	if !out[0].Allowed || !out[1].Allowed || !out[2].Allowed || out[1].Remaining != 0 || out[2].Remaining != 0 {
		t.Errorf("charge 2, dry 3, charge 3: %+v, want all allowed, the dry run unseen", out)
	}
	if got := remaining(t, s, t0, l, "a"); got != 0 {
		t.Errorf("Remaining %d, want 0", got)
	}

	out = decide(t, s, t0,
		store.Request{Key: "b", Limit: l, Cost: 1},
		store.Request{Key: "b", Limit: l, Cost: 5, DryRun: true})
	if !out[0].Allowed || out[1].Allowed {
		t.Errorf("charge 1, dry 5: %+v, want allowed then denied", out)
	}
	if got := remaining(t, s, t0, l, "b"); got != 5 {
		t.Errorf("Remaining %d after a call vetoed by a dry run, want 5", got)
	}
}

// TestLargeBatch exercises the indexed path for batches above the
// stack-allocated size, repeated keys included.
func TestLargeBatch(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 3, Period: time.Minute}
	var reqs []store.Request
	for i := range 60 {
		reqs = append(reqs, store.Request{Key: fmt.Sprint("k", i%20), Limit: l, Cost: 1})
	}
	for i, d := range decide(t, s, t0, reqs...) {
		if want := int64(2 - i/20); !d.Allowed || d.Remaining != want {
			t.Errorf("request %d: %+v, want allowed with Remaining %d", i, d, want)
		}
	}
	reqs = append(reqs, store.Request{Key: "k0", Limit: l, Cost: 1})
	out := decide(t, s, t0, reqs...)
	if out[60].Allowed {
		t.Errorf("a fourth charge of k0 in one call was allowed")
	}
	if got := remaining(t, s, t0, l, "k7"); got != 0 {
		t.Errorf("k7: Remaining %d, want 0 (first call charged, second vetoed)", got)
	}
}

// TestZeroAllocs: the steady-state single-request path allocates nothing.
func TestZeroAllocs(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	ctx := context.Background()
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.SlidingWindow, algorithms.FixedWindow} {
		l := algorithms.Limit{Algorithm: alg, Requests: 100_000_000, Period: time.Hour}
		reqs := []store.Request{{Key: "steady", Limit: l, Cost: 1}}
		out := make([]algorithms.Decision, 1)
		if err := s.Decide(ctx, t0, reqs, out); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(1000, func() {
			if err := s.Decide(ctx, t0, reqs, out); err != nil || !out[0].Allowed {
				t.Fatalf("Decide: %v, allowed %v", err, out[0].Allowed)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %.1f allocs per Decide on an existing key, want 0", alg, allocs)
		}
	}
}

// bytesPerKey stores n distinct keys under l and returns the heap growth
// per key, key bytes and map overhead included.
func bytesPerKey(t testing.TB, l algorithms.Limit, n int) float64 {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%08d", i) // 13 bytes
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(Config{SweepInterval: -1})
	reqs := make([]store.Request, 1)
	out := make([]algorithms.Decision, 1)
	for _, k := range keys {
		reqs[0] = store.Request{Key: k, Limit: l, Cost: 1}
		if err := s.Decide(context.Background(), t0, reqs, out); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != n {
		t.Fatalf("Len %d, want %d distinct keys", s.Len(), n)
	}
	runtime.KeepAlive(s)
	runtime.KeepAlive(keys)
	s.Close()
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// TestBytesPerKey measures the memory of 100,000 keys of each counting
// algorithm and holds the token bucket to 150 bytes a key.
func TestBytesPerKey(t *testing.T) {
	const n = 100_000
	for _, alg := range algorithms.All() {
		l := algorithms.Limit{Algorithm: alg, Requests: 100, Period: time.Minute}
		got := bytesPerKey(t, l, n)
		t.Logf("%v: %.1f bytes per key over %d keys", alg, got, n)
		if alg != algorithms.SlidingWindowLog && got > 150 {
			t.Errorf("%v: %.1f bytes per key, want at most 150", alg, got)
		}
	}
}
