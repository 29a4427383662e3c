package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// goDecide is Go's decision of one request: the reference every key's TTL
// is held to.
func goDecide(l algorithms.Limit, s algorithms.State, now time.Time, cost int64, mode algorithms.Mode) (algorithms.State, algorithms.Decision) {
	r := algorithms.Request{NowMs: now.UnixMilli(), Cost: cost, Mode: mode}
	if l.Calendar != algorithms.NoCalendar {
		r.Bounds = l.Calendar.Bounds(l.Location, r.NowMs)
	}
	return algorithms.DecideAt(l, s, r)
}

// monday is a Monday, 00:00 UTC: the start of a calendar day, an ISO week
// and a month's (2000-05-01), and of a window of any period dividing a
// day.
var monday = time.Date(2000, 5, 1, 0, 0, 0, 0, time.UTC)

// TestSlidingWindowGroupUndoKeepsKey: a Decide of several requests is all
// or nothing. When its last request is denied, a sliding window's key the
// group wrote first holds again exactly the state it held, and lives at
// least as long as that state needs (Go's TTL at its last write, plus
// ClientTime's hour), after a charge or a refund in the same window,
// twice in one group, and after a write that deleted the key (a refund
// of its whole count). The
// key then decides as Go does on the state it held: no count lost or
// doubled.
func TestSlidingWindowGroupUndoKeepsKey(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	const keep = time.Hour // clientTimeKeep
	const slack = 2 * time.Second
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: time.Hour}
	full := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 1, Period: time.Hour}
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		at    time.Duration // the group's moment after the key's first charge
		costs []int64       // the key's requests in the group, before the denied one
		same  bool          // the key's PTTL is the one it had
	}{
		{"a charge", ms, []int64{1}, true},
		{"a refund", ms, []int64{-1}, true},
		{"a refund of the whole count", ms, []int64{-5}, true},
		{"two charges", ms, []int64{1, 2}, true},
		{"a charge and a refund", ms, []int64{3, -4}, true},
		{"a charge in the next window", time.Hour, []int64{1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, c, testConfig())
			defer s.Close()
			key, other := "swundo-"+tc.name, "swundo-full-"+tc.name
			first := monday.Add(ms)
			if d := decide(t, s, first, store.Request{Key: other, Limit: full, Cost: 1})[0]; !d.Allowed {
				t.Fatalf("the other key's one request: %+v", d)
			}
			state, d0 := goDecide(l, algorithms.State{}, first, 5, 0)
			if d := decide(t, s, first, store.Request{Key: key, Limit: l, Cost: 5})[0]; d != d0 {
				t.Fatalf("first charge: %+v, want Go's %+v", d, d0)
			}
			rk := redisKey(t, c, l.Algorithm, key)
			before, err := c.Get(ctx, rk).Result()
			if err != nil {
				t.Fatal(err)
			}
			pttl0 := c.PTTL(ctx, rk).Val()
			now := first.Add(tc.at)
			var reqs []store.Request
			for _, cost := range tc.costs {
				reqs = append(reqs, store.Request{Key: key, Limit: l, Cost: cost})
			}
			reqs = append(reqs, store.Request{Key: other, Limit: full, Cost: 1})
			out := decide(t, s, now, reqs...)
			if out[len(out)-1].Allowed {
				t.Fatalf("the full key's request was allowed: %+v", out)
			}
			after, err := c.Get(ctx, rk).Result()
			if err != nil || after != before {
				t.Fatalf("after the denied group the key holds %q (%v), want %q as before", after, err, before)
			}
			got := c.PTTL(ctx, rk).Val()
			need := first.Add(d0.TTL).Sub(now) + keep
			if got <= need-slack {
				t.Errorf("PTTL %v after the undo; the state put back needs %v", got, need)
			}
			if tc.same && (got < pttl0-slack || got > pttl0+slack) {
				t.Errorf("PTTL %v after the undo, %v before the group", got, pttl0)
			}
			// Nothing counted twice or lost: the next charge decides on
			// the state before the group.
			_, want := goDecide(l, state, now, 1, 0)
			if d := decide(t, s, now, store.Request{Key: key, Limit: l, Cost: 1})[0]; d != want {
				t.Errorf("the next charge: %+v, want Go's %+v on the state before the group", d, want)
			}
		})
	}
}

// TestSlidingWindowKeyTTLSkewAndFlush: a key's TTL after a write still
// covers its state's end as the write's own clock sees it when the
// write before it came from a replica whose clock ran half an hour
// ahead (Config.ClientTime keeps an hour for such clocks), from the
// previous release (v0.2.0 kept no extra hour: its state's TTL as is),
// or from before a FUNCTION FLUSH (the library reloaded between them).
func TestSlidingWindowKeyTTLSkewAndFlush(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	const slack = 2 * time.Second
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: 24 * time.Hour}
	s := newStore(t, c, testConfig())
	defer s.Close()
	// check: the key's PTTL covers the state's end seen at now, Go's TTL
	// of state there, and the write left the state Go's.
	check := func(t *testing.T, key string, state algorithms.State, now time.Time, cost int64) {
		t.Helper()
		next, want := goDecide(l, state, now, cost, 0)
		want.Debt = 0
		if d := decide(t, s, now, store.Request{Key: key, Limit: l, Cost: cost})[0]; d != want {
			t.Fatalf("charge %d: %+v, want Go's %+v", cost, d, want)
		}
		rk := redisKey(t, c, l.Algorithm, key)
		if got := c.PTTL(ctx, rk).Val(); got <= want.TTL-slack {
			t.Errorf("PTTL %v, but the state needs %v from the clock of the last write", got, want.TTL)
		}
		_, again := goDecide(l, next, now, 0, 0)
		if d := decide(t, s, now, store.Request{Key: key, Limit: l})[0]; d != again {
			t.Errorf("a look after the write: %+v, want Go's %+v", d, again)
		}
	}
	mid := monday.Add(12 * time.Hour)
	t.Run("a clock half an hour ahead", func(t *testing.T) {
		key := "swskew"
		state, _ := goDecide(l, algorithms.State{}, mid.Add(30*time.Minute), 4, 0)
		decide(t, s, mid.Add(30*time.Minute), store.Request{Key: key, Limit: l, Cost: 4})
		check(t, key, state, mid, 1)
	})
	t.Run("the previous release's key", func(t *testing.T) {
		// TestRollingUpgradeState's bytes: v0.2.0's state of 3 of 10 a
		// minute charged at 1,780,000,000,123 ms; v0.2.0 set the TTL to
		// the window's start plus two minutes, less now.
		lm := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: time.Minute}
		at := time.UnixMilli(1_780_000_000_123)
		state, d := goDecide(lm, algorithms.State{}, at, 3, 0)
		rk := redisKey(t, c, lm.Algorithm, "swold")
		if err := c.Set(ctx, rk, "(\xc0Ci\xf9\x02\x03", d.TTL).Err(); err != nil {
			t.Fatal(err)
		}
		now := at.Add(1500 * time.Millisecond)
		_, want := goDecide(lm, state, now, 2, 0)
		if got := decide(t, s, now, store.Request{Key: "swold", Limit: lm, Cost: 2})[0]; got != want {
			t.Fatalf("charge 2 on v0.2.0's state: %+v, want Go's %+v", got, want)
		}
		if got := c.PTTL(ctx, rk).Val(); got <= want.TTL-slack {
			t.Errorf("PTTL %v, but the state needs %v", got, want.TTL)
		}
	})
	t.Run("FUNCTION FLUSH between writes", func(t *testing.T) {
		key := "swflush"
		state, _ := goDecide(l, algorithms.State{}, mid, 4, 0)
		decide(t, s, mid, store.Request{Key: key, Limit: l, Cost: 4})
		if err := c.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		check(t, key, state, mid.Add(time.Millisecond), 1)
	})
}

// TestGroupUndoEveryAlgorithm: a Decide of a request on a key of each
// algorithm and a denied last one writes nothing: every key holds again
// the bytes it held, so the group's undo list, past the room it starts
// with, puts back every record. Its PTTL is no shorter than it was: a
// charge's write put back keeps the TTL the charge set (a bucket's, a
// few minutes longer here), at most the limit's period more.
func TestGroupUndoEveryAlgorithm(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	const slack = 2 * time.Second
	for _, batch := range []int{0, 1} {
		s := newStore(t, c, func() redisstore.Config { cfg := testConfig(); cfg.BatchMaxSize = batch; return cfg }())
		defer s.Close()
		first := monday.Add(time.Minute)
		full := store.Request{Key: fmt.Sprintf("undoall-full-%d", batch), Limit: algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 1, Period: time.Hour}, Cost: 1}
		decide(t, s, first, full)
		var reqs []store.Request
		for _, alg := range algorithms.All() {
			r := store.Request{Key: fmt.Sprintf("undoall-%d-%v", batch, alg), Limit: algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Hour}, Cost: 3}
			if d := decide(t, s, first, r)[0]; !d.Allowed {
				t.Fatalf("%v: first charge denied", alg)
			}
			reqs = append(reqs, r)
		}
		type held struct {
			val  string
			pttl time.Duration
		}
		snapshot := func() []held {
			var out []held
			for _, r := range reqs {
				rk := redisKey(t, c, r.Limit.Algorithm, r.Key)
				v, err := c.Get(ctx, rk).Result()
				if err != nil {
					t.Fatalf("%s: %v", rk, err)
				}
				out = append(out, held{v, c.PTTL(ctx, rk).Val()})
			}
			return out
		}
		before := snapshot()
		for i := range reqs {
			reqs[i].Cost = 1
		}
		now := first.Add(time.Millisecond)
		out := decide(t, s, now, append(reqs, full)...)
		if out[len(out)-1].Allowed {
			t.Fatalf("batch %d: the full key's request was allowed", batch)
		}
		for i, h := range snapshot() {
			if h.val != before[i].val || h.pttl < before[i].pttl-slack || h.pttl > before[i].pttl+time.Hour {
				t.Errorf("batch %d, %v: after the denied group %q with PTTL %v, want %q with %v as before", batch, reqs[i].Limit.Algorithm, h.val, h.pttl, before[i].val, before[i].pttl)
			}
		}
	}
}

// TestSlidingWindowKeyTTLTrace: along a random trace on Redis' clock (the
// production default: no hour added, windows of a second, so a TTL
// short by a window shows) of charges, refunds, debts
// and looks under one limit, after every call the key lives at least as
// long as a look at it says its state matters (the look's TTL: Lua's,
// which TestLuaMatchesGo holds to Go's). Seeded by the clock: a failure
// logs its seed.
func TestSlidingWindowKeyTTLTrace(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	// The moments between the look and PTTL; a TTL too short is short by
	// a window.
	const slack = 250 * time.Millisecond
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second})
	defer s.Close()
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 6, Period: time.Second}
	key := fmt.Sprintf("swtrace-%d", seed)
	rk := redisKey(t, c, l.Algorithm, key)
	for i := range 40 {
		cost := rng.Int64N(10) - 3 // refunds, looks, charges; some above what fits
		var mode algorithms.Mode
		if rng.IntN(3) == 0 {
			mode = algorithms.Debt
		}
		decide(t, s, time.Now(), store.Request{Key: key, Limit: l, Cost: cost, Mode: mode})
		look := decide(t, s, time.Now(), store.Request{Key: key, Limit: l})[0]
		pttl := c.PTTL(ctx, rk).Val()
		if look.TTL > slack && pttl < look.TTL-slack {
			t.Fatalf("seed %d, step %d (cost %d mode %d): PTTL %v, the state needs %v", seed, i, cost, mode, pttl, look.TTL)
		}
		time.Sleep(time.Duration(rng.IntN(250)) * time.Millisecond)
	}
}
