package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// TestKeptTTLChaosTrace: the kept TTL of the token bucket, the sliding
// window and the leaky bucket along a random trace on Redis' clock (the
// production default: no hour kept) in which one key is charged,
// refunded, put in debt and looked at under four limits at once, as
// rules sharing a key or a reload would: a call decides the key once or
// twice (two limits, the second seeing the first's write), alone or in a
// group that a full key denies at its end (undone). After every call the
// key lives at least as long as a look under the limit of its last
// write says its state matters, and the expiry its value records is no
// later than its own. Seeded by the clock, or FLOODGATE_LUA_SEED.
func TestKeptTTLChaosTrace(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	const slack = time.Millisecond // PX and PEXPIRETIME are whole milliseconds
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second})
	defer s.Close()
	seed := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("FLOODGATE_LUA_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (replay with FLOODGATE_LUA_SEED=%d; the trace's pauses vary)", seed, seed)
	full := store.Request{Key: fmt.Sprint("chaos-full-", seed), Limit: swl(1, time.Hour), Cost: 1}
	decide(t, s, time.Now(), full)
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.SlidingWindow, algorithms.LeakyBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			limits := []algorithms.Limit{
				{Algorithm: alg, Requests: 20, Period: time.Second},
				{Algorithm: alg, Requests: 10, Period: 2 * time.Second, Burst: 4},
				{Algorithm: alg, Requests: 40, Period: 500 * time.Millisecond, Burst: 60},
				{Algorithm: alg, Requests: 3, Period: 3 * time.Second},
			}
			if alg == algorithms.SlidingWindow { // no burst
				for i := range limits {
					limits[i].Burst = 0
				}
			}
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(alg)))
			key := fmt.Sprint("chaos-", seed)
			rk := redisstore.StateKey(alg, key)
			var last *algorithms.Limit // the limit of the key's last write
			recorded := 0
			for i := range 120 {
				var reqs []store.Request
				for range 1 + rng.IntN(2) {
					var mode algorithms.Mode
					if rng.IntN(4) == 0 {
						mode = algorithms.Debt
					}
					reqs = append(reqs, store.Request{Key: key, Limit: limits[rng.IntN(len(limits))], Cost: rng.Int64N(12) - 3, Mode: mode})
				}
				undone := rng.IntN(4) == 0
				if undone {
					reqs = append(reqs, full)
				}
				out := decide(t, s, time.Now(), reqs...)
				wrote := !undone
				for k, r := range reqs {
					if r.Cost > 0 && !out[k].Allowed {
						wrote = false // the group is undone, or the lone request wrote nothing
					}
				}
				if wrote {
					for k := range reqs {
						if reqs[k].Cost != 0 {
							last = &reqs[k].Limit
						}
					}
				}
				if last == nil {
					continue
				}
				// The look runs on Redis' clock at or after before, so the
				// state matters until before + look.TTL at least.
				before := c.Time(ctx).Val().UnixMilli()
				look := decide(t, s, time.Now(), store.Request{Key: key, Limit: *last})[0]
				pe, err := c.PExpireTime(ctx, rk).Result()
				if err != nil {
					t.Fatal(err)
				}
				at := pe.Milliseconds()
				if pe < 0 {
					at = int64(pe) // -1: no TTL, -2: no key
				}
				if look.TTL > slack && at < before+(look.TTL-slack).Milliseconds() {
					t.Fatalf("seed %d, step %d %+v: the key expires at %d (%d), the state needs it until %d at least under %v", seed, i, reqs, at, at-before, before+look.TTL.Milliseconds(), *last)
				}
				v := c.Get(ctx, rk).Val()
				exp, ok := keptExpiry(v)
				if alg != algorithms.TokenBucket {
					exp, ok = counterExpiry(alg, v)
				}
				if ok && exp > at {
					t.Fatalf("seed %d, step %d %+v: the value records the expiry %d, the key's is %d", seed, i, reqs, exp, at)
				}
				if ok {
					recorded++
				}
				time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
			}
			if recorded == 0 {
				t.Errorf("seed %d: no state recorded its expiry", seed)
			}
		})
	}
}
