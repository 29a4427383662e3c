package memstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// TestKeyCapBatchKeepsItsOwnKeys: a batch that charges a key the store
// holds and inserts new keys that fill the shard exactly to its cap keeps
// every key of the batch: each then holds exactly what an uncapped store
// holds (the batch stays all-or-nothing).
func TestKeyCapBatchKeepsItsOwnKeys(t *testing.T) {
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.SlidingWindowLog} {
		t.Run(alg.String(), func(t *testing.T) {
			// 6 per minute: a token bucket's unit comes back in 10s, a
			// log's unit leaves after a minute, so an entry charged
			// later expires later.
			l := algorithms.Limit{Algorithm: alg, Requests: 6, Period: time.Minute}
			const fillers = 3
			capped := New(Config{MaxKeys: 3 + fillers, Shards: 1, SweepInterval: -1})
			defer capped.Close()
			ref := New(Config{SweepInterval: -1}) // the same calls without a cap
			defer ref.Close()
			both := func(now time.Time, reqs ...store.Request) {
				t.Helper()
				for _, d := range decide(t, capped, now, reqs...) {
					if !d.Allowed {
						t.Fatalf("%v at %v: denied, want allowed", reqs, now)
					}
				}
				decide(t, ref, now, reqs...)
			}
			req := func(key string) store.Request { return store.Request{Key: key, Limit: l, Cost: 1} }

			both(t0, req("old")) // the nearest expiry until the batch charges it
			for i := range fillers {
				both(t0.Add(time.Second), req(fmt.Sprint("filler", i)))
			}
			if n := capped.Len(); n != 1+fillers {
				t.Fatalf("Len %d before the batch, want %d", n, 1+fillers)
			}
			at := t0.Add(2 * time.Second)
			batch := []store.Request{req("old"), req("new0"), req("new1")}
			both(at, batch...)

			if n := capped.Len(); n != 3+fillers {
				t.Errorf("Len %d after the batch, want the cap %d", n, 3+fillers)
			}
			for _, r := range batch {
				got, want := decide(t, capped, at, store.Request{Key: r.Key, Limit: l}), decide(t, ref, at, store.Request{Key: r.Key, Limit: l})
				if got[0] != want[0] {
					t.Errorf("%s after the batch: %+v, want %+v (its charges kept)", r.Key, got[0], want[0])
				}
			}
		})
	}
}
