package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// clientTimeStore starts a Redis and a Store on it that decides at the
// now passed to Decide (ClientTime) and sends each call alone; it stops
// both when the test ends.
func clientTimeStore(t *testing.T) (*redis.Client, *Store) {
	t.Helper()
	c := redistest.StartServer(t).Client()
	s, err := New(c, Config{ClientTime: true, Timeout: 5 * time.Second, BatchMaxSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return c, s
}

// periodLimit is a limit of n requests a period p.
func periodLimit(a algorithms.Algorithm, n int64, p time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: a, Requests: n, Period: p}
}

// leBytes is v as n little-endian two's complement bytes.
func leBytes(v int64, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return string(b)
}

// secondForm is first, a first-form counter state (lua/lib.lua's codec),
// in the second form with e (the key's expiry, ms after the time field)
// in le bytes.
func secondForm(first string, e int64, le int) string {
	h := first[0]
	ac := 1 + int(h>>3) + int(h&7)
	return string([]byte{64 + h, byte(le)}) + first[1:ac] + leBytes(e, le) + first[ac:]
}

// TestSecondStateForm: a state in the codec's second form (which a later
// version may write while this one runs) decides exactly as the same
// state in the first form, on every path (a look, a lone Decide, the
// general path of two requests of one key, a settlement), for every
// counter algorithm; the first write over it leaves the same first-form
// value and TTL as over the first form; and a second form that does not
// add up is refused as malformed, not misread.
func TestSecondStateForm(t *testing.T) {
	c, s := clientTimeStore(t)
	ctx := context.Background()
	t0 := time.UnixMilli(1_780_000_000_000)
	for _, l := range []algorithms.Limit{
		periodLimit(algorithms.TokenBucket, 100, time.Minute),
		periodLimit(algorithms.SlidingWindow, 10, time.Second),
		periodLimit(algorithms.FixedWindow, 10, time.Minute),
		periodLimit(algorithms.LeakyBucket, 100, time.Minute),
		{Algorithm: algorithms.FixedWindow, Requests: 1000, Calendar: algorithms.Day},
	} {
		name := l.Algorithm.String()
		if l.Calendar != 0 {
			name = "calendar"
		}
		t.Run(name, func(t *testing.T) {
			first, second := "form1:"+name, "form2:"+name
			k1, k2 := KeyName(DefaultPrefix, l.Algorithm, first), KeyName(DefaultPrefix, l.Algorithm, second)
			out := make([]algorithms.Decision, 2)
			if err := s.Decide(ctx, t0, []store.Request{{Key: first, Limit: l, Cost: 3}}, out[:1]); err != nil {
				t.Fatal(err)
			}
			v1, err := c.Get(ctx, k1).Result()
			if err != nil {
				t.Fatal(err)
			}
			ttl, err := c.PTTL(ctx, k1).Result()
			if err != nil || ttl <= 0 {
				t.Fatalf("PTTL %v, %v", ttl, err)
			}
			if err := c.Set(ctx, k2, secondForm(v1, 4_321_000, 3), ttl).Err(); err != nil {
				t.Fatal(err)
			}
			// Each step runs on both keys, at the same now.
			steps := []struct {
				path string
				at   time.Duration
				cost int64
			}{
				{"look", 100 * time.Millisecond, 2},
				{"general", 200 * time.Millisecond, 4},
				{"lone", 300 * time.Millisecond, 1},
				{"settle", 400 * time.Millisecond, 2},
			}
			for i, st := range steps {
				if i == 1 {
					// The look wrote nothing: the second form is still there.
					if v, _ := c.Get(ctx, k2).Result(); v[0] < 64 {
						t.Fatalf("after a look the value is %q, want the second form still", v)
					}
				}
				now := t0.Add(st.at)
				var got [2][]algorithms.Decision
				for j, key := range []string{first, second} {
					switch st.path {
					case "look", "lone":
						d := make([]algorithms.Decision, 1)
						if err := s.Decide(ctx, now, []store.Request{{Key: key, Limit: l, Cost: st.cost, DryRun: st.path == "look"}}, d); err != nil {
							t.Fatalf("%s: %v", st.path, err)
						}
						got[j] = d
					case "general":
						d := make([]algorithms.Decision, 2)
						half := store.Request{Key: key, Limit: l, Cost: st.cost / 2}
						if err := s.Decide(ctx, now, []store.Request{half, half}, d); err != nil {
							t.Fatalf("%s: %v", st.path, err)
						}
						got[j] = d
					case "settle":
						r, err := s.Settle(ctx, now, store.Settlement{Key: key, Limit: l, Actual: st.cost, IdempotencyKey: key + strconv.Itoa(i)})
						if err != nil {
							t.Fatalf("%s: %v", st.path, err)
						}
						got[j] = []algorithms.Decision{r.Decision}
					}
				}
				for n := range got[0] {
					if got[0][n] != got[1][n] {
						t.Errorf("%s at +%v: the second form decided %+v, the first %+v", st.path, st.at, got[1][n], got[0][n])
					}
				}
			}
			v1, _ = c.Get(ctx, k1).Result()
			v2, _ := c.Get(ctx, k2).Result()
			if v2 != v1 {
				t.Errorf("after the writes the second-form key holds %q, the first-form one %q", v2, v1)
			}
			ttl1, _ := c.PTTL(ctx, k1).Result()
			ttl2, _ := c.PTTL(ctx, k2).Result()
			if d := ttl1 - ttl2; d < -50*time.Millisecond || d > 50*time.Millisecond {
				t.Errorf("after the writes the TTLs are %v (second form) and %v (first)", ttl2, ttl1)
			}
		})
	}

	// Second forms that do not add up, on each path.
	l := periodLimit(algorithms.TokenBucket, 100, time.Minute)
	good := secondForm(string([]byte{2*8 + 3})+leBytes(500, 2)+leBytes(600, 3)+leBytes(1<<33, 5), 1000, 2)
	for _, bad := range []string{
		"\x80" + good[1:], // bit 7 of the header
		good[:1],          // no second byte
		good[:5],          // shorter than a and c
		good[:1] + "\x08" + good[2:7] + strings.Repeat("\x00", 8) + good[9:], // an 8-byte expiry
		good + "\x00\x00\x00\x00", // b of 9 bytes
	} {
		key := "form2:bad"
		if err := c.Set(ctx, KeyName(DefaultPrefix, l.Algorithm, key), bad, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		req := store.Request{Key: key, Limit: l, Cost: 1}
		errs := []error{
			s.Decide(ctx, t0, []store.Request{req}, make([]algorithms.Decision, 1)),
			s.Decide(ctx, t0, []store.Request{req, req}, make([]algorithms.Decision, 2)),
		}
		_, err := s.Settle(ctx, t0, store.Settlement{Key: key, Limit: l, Actual: 1, IdempotencyKey: "bad" + bad})
		errs = append(errs, err)
		for i, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "malformed state") {
				t.Errorf("state %q, path %d: %v, want malformed state", bad, i, err)
			}
		}
	}
}
