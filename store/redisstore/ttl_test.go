package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// TestKeyTTL pins the TTL every algorithm's key is left with in Redis
// after a spend on a new key, a spend on an existing one and a refund:
// the decision's TTL (algorithms.Decide's, in ms) plus the hour
// Config.ClientTime keeps every key
// (a token bucket's padded as lua/token_bucket.lua says), rounded up by
// at most 1/64, less the moments between the write and the
// PTTL. A fixed window's window key keeps the TTL the write that created
// it set (the window's end). Each step runs every
// algorithm alone (its own script call) and all together (one call), on
// the batched and the unbatched store, so every way a script writes a
// key is covered: a whole write (SET ... PX, or KEEPTTL) and the log's
// update in place (SETRANGE then PEXPIRE). The TTLs are minutes long, so
// a TTL set in seconds where milliseconds were meant (EXPIRE for
// PEXPIRE), or the other way round, is off by a factor of 1000. The
// simulated clock moves while Redis' barely does, so a kept TTL reads as
// it was set.
func TestKeyTTL(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	const keep = time.Hour // clientTimeKeep
	// A few seconds for a slow moment between a write and its PTTL;
	// the mistakes caught are off by far more.
	const slack = 5 * time.Second
	steps := []struct {
		at   time.Duration // after t0
		cost int64
	}{{0, 1}, {time.Minute, 2}, {2 * time.Minute, -1}}
	for _, mode := range []struct {
		name      string
		batchSize int
	}{{"batched", 0}, {"unbatched", 1}} {
		for _, together := range []bool{false, true} {
			name := mode.name + "/alone"
			if together {
				name = mode.name + "/together"
			}
			t.Run(name, func(t *testing.T) {
				cfg := testConfig() // decides at the now passed
				cfg.BatchMaxSize = mode.batchSize
				s := newStore(t, c, cfg)
				defer s.Close()
				type keyed struct {
					req   store.Request
					redis string // its key in Redis
					state algorithms.State
					set   time.Time     // when its TTL was last set (simulated)
					ttl   time.Duration // the TTL set then
				}
				var keys []*keyed
				for _, alg := range algorithms.All() {
					key := "ttl-" + name + "-" + alg.String()
					keys = append(keys, &keyed{
						req: store.Request{Key: key, Limit: algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Hour}},
					})
				}
				for _, step := range steps {
					now := t0.Add(step.at)
					var reqs []store.Request
					for _, k := range keys {
						k.req.Cost = step.cost
						reqs = append(reqs, k.req)
					}
					if together {
						decide(t, s, now, reqs...)
					} else {
						for _, r := range reqs {
							decide(t, s, now, r)
						}
					}
					for _, k := range keys {
						var d algorithms.Decision
						k.state, d = algorithms.Decide(k.req.Limit, k.state, now, step.cost)
						want := d.TTL + keep
						kept := k.req.Limit.Algorithm.Facts().Afresh && !k.set.IsZero() && !k.set.Add(k.ttl).Before(now.Add(want))
						if kept {
							want = k.ttl
						} else {
							k.set, k.ttl = now, want
						}
						k.redis = redisKey(t, c, k.req.Limit.Algorithm, k.req.Key)
						got, err := c.PTTL(ctx, k.redis).Result()
						// A counter's PX is rounded up by at most 1/64
						// (lua/lib.lua's px_string); a token bucket's
						// is padded by a quarter of its TTL, a token's
						// time or TBPadMin, whichever is longest
						// (lua/token_bucket.lua).
						hi := want
						if k.req.Limit.Algorithm == algorithms.TokenBucket {
							hi += max(d.TTL/4, k.req.Limit.Period/time.Duration(k.req.Limit.Requests), redisstore.TBPadMin)
						}
						if err != nil || got > hi+hi/64 || got <= want-slack {
							t.Errorf("%v, cost %d at t0+%v: PTTL %s = %v, %v; want %v (the decision's TTL %v plus ClientTime's %v, rounded up by at most 1/64; kept from an earlier write: %v)",
								k.req.Limit.Algorithm, step.cost, step.at, k.redis, got, err, want, d.TTL, keep, kept)
						}
					}
				}
			})
		}
	}
}

// TestSlidingWindowKeyTTL: the sliding window's key always lives until
// its state's end (the decision's TTL plus Config.ClientTime's hour) and
// at most 1/64 of that TTL longer, across writes that keep its end (a
// state of the same length or of another) and writes that move it:
// later (a new window, a count turned positive, a debt) or earlier (a
// refund of the window's whole count). A sliding calendar quota's key
// likewise. Every decision is Go's (algorithms.DecideAt), so a state
// written over one of another length reads back whole. The simulated
// clock moves a few ms between steps, so the key's end reads as now plus
// its PTTL whichever write set it.
func TestSlidingWindowKeyTTL(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	const keep = time.Hour // clientTimeKeep
	const slack = 2 * time.Second
	s := newStore(t, c, testConfig())
	defer s.Close()
	b := t0.Add(24 * time.Hour) // a window's start, and a calendar day's
	type step struct {
		at   time.Duration // after b
		cost int64
		mode algorithms.Mode
	}
	steps := []step{
		{-3 * time.Millisecond, 5, 0},               // a new key
		{-2 * time.Millisecond, 1, 0},               // the same end
		{1 * time.Millisecond, 1, 0},                // a new window: later
		{2 * time.Millisecond, -1, 0},               // no count left in it: earlier
		{3 * time.Millisecond, 1, 0},                // a count again: later
		{4 * time.Millisecond, 12, algorithms.Debt}, // a debt: later
		{5 * time.Millisecond, 1, algorithms.Debt},  // the same end
		{6 * time.Millisecond, -1, 0},               // still in debt: the same end
	}
	for _, tc := range []struct {
		name  string
		l     algorithms.Limit
		steps []step
	}{
		{"hour", algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: time.Hour}, steps},
		{"calendar day", algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Calendar: algorithms.Day}, steps},
		// A count of 100 takes a byte, one of 300 two.
		{"another length", algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 1000, Period: time.Hour}, []step{
			{0, 100, 0}, {time.Millisecond, 200, 0}, {2 * time.Millisecond, -250, 0}, {3 * time.Millisecond, 1, 0}, {4 * time.Millisecond, 1, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := store.Request{Key: "swttl-" + tc.name, Limit: tc.l}
			var state algorithms.State
			for _, step := range tc.steps {
				now := b.Add(step.at)
				req.Cost, req.Mode = step.cost, step.mode
				d := decide(t, s, now, req)[0]
				var model algorithms.Decision
				state, model = algorithms.DecideAt(tc.l, state, algorithms.Request{NowMs: now.UnixMilli(), Cost: step.cost, Mode: step.mode})
				model.Debt = 0 // Decide does not report it
				if !d.Allowed || d != model {
					t.Fatalf("cost %d at b%+v: %+v, want %+v (Go's), allowed", step.cost, step.at, d, model)
				}
				want := d.TTL + keep
				got, err := c.PTTL(ctx, redisKey(t, c, tc.l.Algorithm, req.Key)).Result()
				if err != nil || got <= want-slack || got > want+want/64+slack {
					t.Errorf("cost %d at b%+v: PTTL %v, %v; want %v (the decision's TTL %v plus ClientTime's %v), rounded up by at most 1/64", step.cost, step.at, got, err, want, d.TTL, keep)
				}
			}
		})
	}
}
