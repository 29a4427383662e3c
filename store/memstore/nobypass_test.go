package memstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// spent is a fixed window of 10 an hour.
var spent = algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Hour}

// century is an inline limit any caller may send: 10 per hundred years.
var century = algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: 100 * 365 * 24 * time.Hour}

// exhaust spends key under spent until it denies, at now.
func exhaust(t *testing.T, s *Store, now time.Time, key string) {
	t.Helper()
	for range spent.Requests {
		if d := decide(t, s, now, store.Request{Key: key, Limit: spent, Cost: 1})[0]; !d.Allowed {
			t.Fatalf("%s denied before it was spent: %+v", key, d)
		}
	}
	if d := decide(t, s, now, store.Request{Key: key, Limit: spent, Cost: 1})[0]; d.Allowed {
		t.Fatalf("%s allowed after 10 of 10: %+v", key, d)
	}
}

// stillDenies fails the test if key, spent at exhaust, allows at now.
func stillDenies(t *testing.T, s *Store, now time.Time, key, after string) {
	t.Helper()
	out := make([]algorithms.Decision, 1)
	err := s.Decide(context.Background(), now, []store.Request{{Key: key, Limit: spent, Cost: 1}}, out)
	if err != nil {
		t.Fatalf("%s after %s: %v, want a deny (an existing key decides)", key, after, err)
	}
	if out[0].Allowed {
		t.Fatalf("%s after %s: allowed, remaining %d: the store forgot a counter that still denies", key, after, out[0].Remaining)
	}
}

// TestCapNeverForgetsSpentCounter: a fixed window spent until it denies
// keeps denying however many free settlement records (fresh idempotency
// keys, nothing owed) and 100-year inline checks a caller sends on other
// keys to a store capped at 64 keys.
func TestCapNeverForgetsSpentCounter(t *testing.T) {
	ctx := context.Background()
	s := New(Config{MaxKeys: 64, SweepInterval: -1})
	defer s.Close()
	now := t0.Truncate(time.Hour)
	exhaust(t, s, now, "victim")
	for i := range 6000 {
		set := store.Settlement{Key: fmt.Sprint("other-", i), Limit: spent, IdempotencyKey: fmt.Sprint("idem-", i)}
		if _, err := s.Settle(ctx, now, set); err != nil && !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("settle %d: %v", i, err)
		}
	}
	stillDenies(t, s, now, "victim", "6,000 settles")
	refused := 0
	for i := range 6000 {
		out := make([]algorithms.Decision, 1)
		err := s.Decide(ctx, now, []store.Request{{Key: fmt.Sprint("inline-", i), Limit: century, Cost: 1}}, out)
		if errors.Is(err, store.ErrUnavailable) {
			refused++
		} else if err != nil {
			t.Fatalf("inline %d: %v", i, err)
		}
	}
	stillDenies(t, s, now, "victim", "6,000 inline 100-year checks")
	if refused == 0 {
		t.Errorf("6,000 new keys into a 64-key store: none refused")
	}
	if s.Len()-s.records() > 64 {
		t.Errorf("%d states, cap 64", s.Len()-s.records())
	}
}

// records is the number of settlement records held.
func (s *Store) records() int {
	n := 0
	s.eachShard(func(sh *shard) { n += len(sh.settles) })
	return n
}

// TestCapRandomCallsNeverFreeSpentKey: any mix of checks (single and
// batched, any algorithm, 100-year periods, dry runs), settlements with
// fresh or repeated idempotency keys and sweeps, at any time before the
// window ends, never makes spent keys allow, under the key cap and under
// the byte cap.
func TestCapRandomCallsNeverFreeSpentKey(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			cfg := Config{MaxKeys: 16 + rng.IntN(64), Shards: 1 << rng.IntN(3), SweepInterval: -1}
			if seed%2 == 1 {
				cfg.MaxBytes = MinMaxBytes
			}
			s := New(cfg)
			defer s.Close()
			start := t0.Truncate(time.Hour)
			victims := []string{"v0", "v1", "v2"}
			for _, v := range victims {
				exhaust(t, s, start, v)
			}
			long := strings.Repeat("x", 2000)
			now := start
			for i := range 4000 {
				now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
				if now.Sub(start) >= spent.Period {
					break
				}
				alg := algorithms.All()[rng.IntN(len(algorithms.All()))]
				l := algorithms.Limit{Algorithm: alg, Requests: 1 + int64(rng.IntN(50)), Period: time.Duration(1+rng.IntN(3)) * time.Second}
				if rng.IntN(2) == 0 {
					l.Period = 50 * 365 * 24 * time.Hour // as long as every algorithm takes
				}
				key := fmt.Sprint("k", rng.IntN(500))
				if seed%2 == 1 && rng.IntN(4) == 0 {
					key += long
				}
				switch rng.IntN(5) {
				case 0, 1:
					out := make([]algorithms.Decision, 1)
					err := s.Decide(ctx, now, []store.Request{{Key: key, Limit: l, Cost: int64(rng.IntN(3)), DryRun: rng.IntN(5) == 0}}, out)
					if err != nil && !errors.Is(err, store.ErrUnavailable) {
						t.Fatalf("call %d: %v", i, err)
					}
				case 2:
					n := 2 + rng.IntN(10)
					reqs := make([]store.Request, n)
					for j := range reqs {
						reqs[j] = store.Request{Key: fmt.Sprint("b", rng.IntN(500)), Limit: l, Cost: 1}
					}
					if rng.IntN(3) == 0 {
						reqs[0] = store.Request{Key: victims[rng.IntN(len(victims))], Limit: spent, Cost: 0}
					}
					err := s.Decide(ctx, now, reqs, make([]algorithms.Decision, n))
					if err != nil && !errors.Is(err, store.ErrUnavailable) {
						t.Fatalf("call %d: %v", i, err)
					}
				case 3:
					set := store.Settlement{Key: key, Limit: l, Reserved: int64(rng.IntN(2)), Actual: int64(rng.IntN(3)), IdempotencyKey: fmt.Sprint("i", rng.IntN(1<<30))}
					if seed%2 == 1 {
						set.IdempotencyKey += long[:rng.IntN(store.MaxIdempotencyKeyLen-20)]
					}
					if _, err := s.Settle(ctx, now, set); err != nil && !errors.Is(err, store.ErrUnavailable) {
						t.Fatalf("call %d: %v", i, err)
					}
				case 4:
					if rng.IntN(10) == 0 {
						s.sweep(now)
					}
				}
				if i%50 == 0 {
					v := victims[rng.IntN(len(victims))]
					stillDenies(t, s, now, v, fmt.Sprint(i, " calls"))
				}
				if st := s.Len() - s.records(); st > cfg.MaxKeys {
					t.Fatalf("call %d: %d states, cap %d", i, st, cfg.MaxKeys)
				}
			}
			for _, v := range victims {
				stillDenies(t, s, now, v, "the whole sequence")
			}
		})
	}
}

// TestCapFullRefusesNewKey: a shard full of live counters refuses a
// request that needs a new entry, single or in a batch, with an error
// wrapping store.ErrUnavailable that names the cap, and writes nothing;
// keys it holds keep deciding exactly; an expired entry makes room.
func TestCapFullRefusesNewKey(t *testing.T) {
	ctx := context.Background()
	s := New(Config{MaxKeys: 4, Shards: 1, SweepInterval: -1})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 60, Period: time.Minute}
	for i := range 4 {
		decide(t, s, t0, store.Request{Key: fmt.Sprint("k", i), Limit: l, Cost: int64(10 * (i + 1))})
	}
	out := []algorithms.Decision{{Allowed: true}, {Allowed: true}, {}}
	err := s.Decide(ctx, t0, []store.Request{{Key: "new", Limit: l, Cost: 1}}, out[:1])
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "memory store full: --memory-max-keys 4") {
		t.Fatalf("new key into a full store: %v, want ErrUnavailable naming --memory-max-keys 4", err)
	}
	if out[0].Allowed {
		t.Errorf("refused call left a decision that reads allowed: %+v", out[0])
	}
	err = s.Decide(ctx, t0, []store.Request{{Key: "k0", Limit: l, Cost: 1}, {Key: "new", Limit: l, Cost: 1}}, out[:2])
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("batch with a new key into a full store: %v, want ErrUnavailable", err)
	}
	// A log charged in place is taken back when its batch is refused.
	ll := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Period: time.Minute}
	s2 := New(Config{MaxKeys: 2, Shards: 1, SweepInterval: -1})
	defer s2.Close()
	decide(t, s2, t0, store.Request{Key: "log", Limit: ll, Cost: 3})
	decide(t, s2, t0, store.Request{Key: "other", Limit: ll, Cost: 1})
	if err := s2.Decide(ctx, t0, []store.Request{{Key: "log", Limit: ll, Cost: 2}, {Key: "new", Limit: ll, Cost: 1}}, out[:2]); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("log batch with a new key: %v, want ErrUnavailable", err)
	}
	if d := decide(t, s2, t0, store.Request{Key: "log", Limit: ll})[0]; d.Remaining != 2 {
		t.Errorf("log after a refused batch: remaining %d, want 2 (its charge taken back)", d.Remaining)
	}
	if _, err := s.Settle(ctx, t0, store.Settlement{Key: "new", Limit: l, Actual: 1, IdempotencyKey: "a"}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("settle charging a new key into a full store: %v, want ErrUnavailable", err)
	}
	if s.Len()-s.records() != 4 {
		t.Fatalf("%d states after refusals, want 4", s.Len()-s.records())
	}
	if d := decide(t, s, t0, store.Request{Key: "new", Limit: l})[0]; d.Remaining != 60 {
		t.Errorf("new after refusals: remaining %d, want 60 (nothing written)", d.Remaining)
	}
	for i := range 4 {
		want := int64(60 - 10*(i+1))
		if i == 0 {
			want-- // the single k0 charge below
		}
		if i == 0 {
			if d := decide(t, s, t0, store.Request{Key: "k0", Limit: l, Cost: 1})[0]; !d.Allowed || d.Remaining != want {
				t.Errorf("k0 in a full store: %+v, want allowed with %d remaining", d, want)
			}
			continue
		}
		if got := remaining(t, s, t0, l, fmt.Sprint("k", i)); got != want {
			t.Errorf("k%d: remaining %d, want %d (kept exactly)", i, got, want)
		}
	}
	// k0 (11 spent) is full again after 11 s: its room is free then.
	later := t0.Add(11 * time.Second)
	if err := s.Decide(ctx, later, []store.Request{{Key: "new", Limit: l, Cost: 1}}, out[:1]); err != nil || !out[0].Allowed {
		t.Fatalf("new key once an entry expired: %+v, %v, want allowed", out[0], err)
	}
}

// TestByteCapRefusesNewLog: a shard at its byte share of live logs
// refuses a new one with an error naming --memory-max-bytes, and keeps
// every log it holds exactly.
func TestByteCapRefusesNewLog(t *testing.T) {
	ctx := context.Background()
	s := New(Config{MaxBytes: MinMaxBytes, Shards: 1, SweepInterval: -1})
	defer s.Close()
	kept := 0
	var err error
	for k := range 64 {
		key := fmt.Sprintf("tenant:%02d", k)
		reqs := []store.Request{{Key: key, Limit: fullLog, Cost: 1}}
		out := make([]algorithms.Decision, 1)
		for i := range fullLog.Requests {
			err = s.Decide(ctx, t0.Add(time.Duration(i)*time.Millisecond), reqs, out)
			if err != nil {
				break
			}
		}
		if err != nil {
			break
		}
		kept++
		if s.bytes() > s.MaxBytes() {
			t.Fatalf("%d bytes, cap %d", s.bytes(), s.MaxBytes())
		}
	}
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprint("memory store full: --memory-max-bytes ", MinMaxBytes)) {
		t.Fatalf("after %d full logs: %v, want ErrUnavailable naming --memory-max-bytes", kept, err)
	}
	// Counters with long keys: refused at the byte share, never past it.
	c := New(Config{MaxKeys: 1 << 20, MaxBytes: MinMaxBytes, Shards: 1, SweepInterval: -1})
	defer c.Close()
	long := strings.Repeat("k", 4000)
	tb := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Hour}
	refused := false
	for i := range 1000 {
		err := c.Decide(ctx, t0, []store.Request{{Key: fmt.Sprint(long, i), Limit: tb, Cost: 1}}, make([]algorithms.Decision, 1))
		if errors.Is(err, store.ErrUnavailable) {
			refused = true
		} else if err != nil {
			t.Fatal(err)
		}
		if sh := &c.shards[0]; sh.bytes > sh.maxBytes {
			t.Fatalf("counter %d: %d bytes, share %d", i, sh.bytes, sh.maxBytes)
		}
	}
	if !refused {
		t.Errorf("4 MB of counter keys into a 1 MiB store: none refused")
	}
	for k := range kept {
		d := decide(t, s, t0.Add(fullLog.Period/2), store.Request{Key: fmt.Sprintf("tenant:%02d", k), Limit: fullLog, Cost: 1})[0]
		if d.Allowed {
			t.Fatalf("full log %d allowed: the byte cap forgot it", k)
		}
	}
}

// TestCapFullRoomAfterExpiry: a full shard that refused a new key makes
// room once any of its states expires: one that was there when it was
// refused, or one written since.
func TestCapFullRoomAfterExpiry(t *testing.T) {
	ctx := context.Background()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 60, Period: time.Minute}
	try := func(s *Store, at time.Time, key string) error {
		return s.Decide(ctx, at, []store.Request{{Key: key, Limit: l, Cost: 1}}, make([]algorithms.Decision, 1))
	}
	s := New(Config{MaxKeys: 2, Shards: 1, SweepInterval: -1})
	defer s.Close()
	decide(t, s, t0, store.Request{Key: "short", Limit: l, Cost: 1}) // full again in 1s
	decide(t, s, t0, store.Request{Key: "long", Limit: l, Cost: 50})
	if err := try(s, t0, "new"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("new key into a full shard: %v, want ErrUnavailable", err)
	}
	if err := try(s, t0.Add(2*time.Second), "new"); err != nil {
		t.Fatalf("new key once short expired: %v", err)
	}
	// Now full with long (50 s) and new (1 s): forget new, write a
	// state that expires in 1 s, and refuse at +3 s (none expired).
	if err := s.Reset(ctx, algorithms.TokenBucket, "new"); err != nil {
		t.Fatal(err)
	}
	if err := try(s, t0.Add(3*time.Second), "brief"); err != nil {
		t.Fatal(err)
	}
	if err := try(s, t0.Add(3*time.Second), "third"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("third key: %v, want ErrUnavailable", err)
	}
	if err := try(s, t0.Add(5*time.Second), "third"); err != nil {
		t.Fatalf("third key once brief expired: %v", err)
	}
}

// TestCapRecordsEvictNearest: records beyond their share evict the one
// that expires first, so the newest settlements stay duplicates; records
// count in Len and their bytes stay within their share.
func TestCapRecordsEvictNearest(t *testing.T) {
	ctx := context.Background()
	s := New(Config{MaxKeys: 4, Shards: 1, SweepInterval: -1})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1000, Period: time.Hour}
	set := func(i int) store.Settlement {
		return store.Settlement{Key: "k", Limit: l, Actual: 1, IdempotencyKey: fmt.Sprint("idem-", i)}
	}
	for i := range 10 {
		if _, err := s.Settle(ctx, t0.Add(time.Duration(i)*time.Second), set(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, recs := s.Len(), s.records(); n != 5 || recs != 4 {
		t.Fatalf("Len %d with %d records, want 5 (1 state, 4 records)", n, recs)
	}
	for i := 9; i >= 6; i-- {
		r, err := s.Settle(ctx, t0.Add(10*time.Second), set(i))
		if err != nil || !r.Duplicate {
			t.Errorf("retry of settlement %d: %+v, %v, want a duplicate (the newest are kept)", i, r, err)
		}
	}
	b := New(Config{MaxKeys: 1 << 20, Shards: 1, MaxBytes: MinMaxBytes, SweepInterval: -1})
	defer b.Close()
	long := strings.Repeat("x", store.MaxIdempotencyKeyLen-10)
	for i := range 8000 {
		st := store.Settlement{Key: "k", Limit: l, IdempotencyKey: fmt.Sprint(long, i)}
		if _, err := b.Settle(ctx, t0, st); err != nil {
			t.Fatal(err)
		}
	}
	// Expired records are all dropped, not only the one making room, and
	// then no live record is evicted.
	w := New(Config{MaxKeys: 4, Shards: 1, SettleWindow: time.Minute, SweepInterval: -1})
	defer w.Close()
	for i, at := range []time.Duration{0, 0, 90 * time.Second, 90 * time.Second, 2 * time.Minute} {
		if _, err := w.Settle(ctx, t0.Add(at), set(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.records(); n != 3 {
		t.Errorf("%d records after two expired and one came to four, want 3", n)
	}
	sh := &b.shards[0]
	if sh.recBytes > sh.maxBytes || sh.recBytes < sh.maxBytes/2 {
		t.Errorf("records take %d bytes, want within their share %d and near it", sh.recBytes, sh.maxBytes)
	}
}

// TestCapRefusedLogUndone: a sliding window log charged in place (its old
// units left, their slots reused) is taken back when the shard has no
// room for the new key its call also needs, single or batched.
func TestCapRefusedLogUndone(t *testing.T) {
	ctx := context.Background()
	ll := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 4, Period: time.Minute}
	tl := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 4, Period: time.Hour}
	s := New(Config{MaxKeys: 2, Shards: 1, SweepInterval: -1})
	defer s.Close()
	decide(t, s, t0, store.Request{Key: "log", Limit: ll, Cost: 2})
	decide(t, s, t0.Add(30*time.Second), store.Request{Key: "log", Limit: ll, Cost: 2})
	decide(t, s, t0, store.Request{Key: "other", Limit: tl, Cost: 1})
	at := t0.Add(61 * time.Second)
	if err := s.Decide(ctx, at, []store.Request{{Key: "log", Limit: ll, Cost: 2}, {Key: "new", Limit: tl, Cost: 1}}, make([]algorithms.Decision, 2)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("batch with a new key: %v, want ErrUnavailable", err)
	}
	if d := decide(t, s, at, store.Request{Key: "log", Limit: ll})[0]; d.Remaining != 2 {
		t.Errorf("log after a refused batch: remaining %d, want 2", d.Remaining)
	}
	// A single new log into the full shard: refused, nothing kept.
	if err := s.Decide(ctx, at, []store.Request{{Key: "log2", Limit: ll, Cost: 2}}, make([]algorithms.Decision, 1)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("new log: %v, want ErrUnavailable", err)
	}
	if d := decide(t, s, at, store.Request{Key: "log2", Limit: ll})[0]; d.Remaining != 4 {
		t.Errorf("new log after refusal: remaining %d, want 4", d.Remaining)
	}
}

// TestCapFullStillGivesBack: a full store still answers a call that
// writes no new state (a give-back on a key it does not hold), alone and
// batched with a held key.
func TestCapFullStillGivesBack(t *testing.T) {
	ctx := context.Background()
	s := New(Config{MaxKeys: 1, Shards: 1, SweepInterval: -1})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Minute}
	decide(t, s, t0, store.Request{Key: "held", Limit: l, Cost: 3})
	out := make([]algorithms.Decision, 2)
	if err := s.Decide(ctx, t0, []store.Request{{Key: "new", Limit: l, Cost: -1}}, out[:1]); err != nil || !out[0].Allowed {
		t.Fatalf("give-back on a key the full store does not hold: %+v, %v; want allowed", out[0], err)
	}
	if err := s.Decide(ctx, t0, []store.Request{{Key: "held", Limit: l, Cost: 1}, {Key: "new", Limit: l, Cost: -1}}, out); err != nil || !out[0].Allowed {
		t.Fatalf("batch of a held key and a give-back: %+v, %v; want allowed", out, err)
	}
	if d := decide(t, s, t0, store.Request{Key: "held", Limit: l})[0]; d.Remaining != 6 {
		t.Errorf("held key: remaining %d, want 6", d.Remaining)
	}
}
