package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// TestKeyTTL pins the TTL every algorithm's key is left with in Redis
// after a spend on a new key, a spend on an existing one and a refund:
// the decision's TTL (algorithms.Decide's, in ms) plus the hour
// Config.ClientTime keeps every key,
// rounded up by at most 1/64, less the moments between the write and the
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
						// (lua/lib.lua's px_string).
						if err != nil || got > want+want/64 || got <= want-slack {
							t.Errorf("%v, cost %d at t0+%v: PTTL %s = %v, %v; want %v (the decision's TTL %v plus ClientTime's %v, rounded up by at most 1/64; kept from an earlier write: %v)",
								k.req.Limit.Algorithm, step.cost, step.at, k.redis, got, err, want, d.TTL, keep, kept)
						}
					}
				}
			})
		}
	}
}
