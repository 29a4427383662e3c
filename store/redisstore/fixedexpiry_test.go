package redisstore

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// TestFixedWindowExpiry: a fixed window's state holds its key's expiry
// (C, ms after the window start A), and a write whose key already lives
// long enough keeps the key's TTL instead of setting it again. On Redis'
// own clock, against Redis' own expiry times (PEXPIRETIME), for every way
// a state is written (a lone Decide, the general path of two requests of
// one key, a settlement): the expiry recorded never lies after the one
// Redis holds, always covers what the state needs (its window's end, in
// debt too), is kept while it does, and is set again when it
// does not: a state of an earlier version (C = 0), a recorded expiry
// shorter than the window, a debt that ends with its window, a limit
// whose period grew.
func TestFixedWindowExpiry(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s, err := New(c, Config{Timeout: 5 * time.Second, BatchMaxSize: 1}) // Redis' clock
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	decide := func(t *testing.T, reqs ...store.Request) {
		t.Helper()
		if err := s.Decide(ctx, time.Now(), reqs, make([]algorithms.Decision, len(reqs))); err != nil {
			t.Fatal(err)
		}
	}
	stateKey := func(key string) string { return KeyName(DefaultPrefix, algorithms.FixedWindow, key) }
	hour := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Hour}
	minute := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Minute}
	const hourMs = int64(time.Hour / time.Millisecond)

	// write decides req (cost, mode as given) by the named path and returns
	// the state it left and the key's expiry in Redis (Unix ms).
	write := func(t *testing.T, path string, req store.Request) (algorithms.State, int64) {
		t.Helper()
		switch path {
		case "lone":
			decide(t, req)
		case "general": // two requests of one key in one call
			half := req
			half.Cost = req.Cost / 2
			rest := req
			rest.Cost = req.Cost - half.Cost
			decide(t, half, rest)
		case "settle":
			st := store.Settlement{Key: req.Key, Limit: req.Limit, Actual: req.Cost, IdempotencyKey: req.Key + time.Now().String()}
			if req.Cost < 0 { // a refund: less used than reserved
				st.Reserved, st.Actual = -req.Cost, 0
			}
			if _, err := s.Settle(ctx, time.Now(), st); err != nil {
				t.Fatal(err)
			}
		}
		return stateAndExpiry(t, c, stateKey(req.Key))
	}
	// covers checks the invariant of every write: Redis keeps the key at
	// least until A + C, and A + C covers the window's end (two ends in
	// debt).
	covers := func(t *testing.T, l algorithms.Limit, st algorithms.State, exp int64) {
		t.Helper()
		need := st.A + l.PeriodMs()
		if st.C <= 0 || st.A+st.C < need || exp < st.A+st.C {
			t.Fatalf("state %+v (expiry A + C = %d), Redis expires the key at %d: want %d <= A + C <= %d", st, st.A+st.C, exp, need, exp)
		}
	}

	for _, path := range []string{"lone", "general", "settle"} {
		t.Run(path, func(t *testing.T) {
			key := func(name string) string { return "fx-" + path + "-" + name }

			t.Run("kept in the window", func(t *testing.T) {
				req := store.Request{Key: key("kept"), Limit: hour, Cost: 2}
				for range 3 { // again if the hour turned between the writes
					st1, exp1 := write(t, path, req)
					covers(t, hour, st1, exp1)
					time.Sleep(3 * time.Millisecond)
					st2, exp2 := write(t, path, req)
					covers(t, hour, st2, exp2)
					if st2.A != st1.A {
						continue
					}
					if exp2 != exp1 || st2.A+st2.C != st1.A+st1.C || st2.B != st1.B+2 {
						t.Fatalf("second write in the window: state %+v, expiry %d; want the first's expiry %d kept (state %+v)", st2, exp2, exp1, st1)
					}
					return
				}
				t.Fatal("the window turned on every try")
			})

			t.Run("an earlier version's state", func(t *testing.T) {
				req := store.Request{Key: key("old"), Limit: hour, Cost: 1}
				now := time.Now().UnixMilli()
				start := now - now%hourMs
				// What an earlier version wrote: C = 0, the TTL its own.
				putState(t, c, stateKey(req.Key), start, 3, 0, 10*time.Second)
				st, exp := write(t, path, req)
				covers(t, hour, st, exp)
				if st.A == start && st.B != 4 { // else the hour turned
					t.Fatalf("state %+v: want the earlier version's count 3, plus 1", st)
				}
			})

			t.Run("a recorded expiry short of the window", func(t *testing.T) {
				req := store.Request{Key: key("short"), Limit: hour, Cost: 1}
				now := time.Now().UnixMilli()
				start := now - now%hourMs
				// Recorded and real: 5 s from now, far short of the hour's end.
				putState(t, c, stateKey(req.Key), start, 3, now-start+5000, 5*time.Second)
				st, exp := write(t, path, req)
				covers(t, hour, st, exp)
				if st.A == start && st.B != 4 { // else the hour turned
					t.Fatalf("state %+v: want the stored count 3, plus 1", st)
				}
			})

			t.Run("a count crossing a byte", func(t *testing.T) {
				big := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1000, Period: time.Hour}
				now := time.Now().UnixMilli()
				if left := hourMs - now%hourMs; left < 10_000 {
					// The five writes must share one hour: start in the next.
					time.Sleep(time.Duration(left+1) * time.Millisecond)
					now = time.Now().UnixMilli()
				}
				start := now - now%hourMs
				// 127 counted, the key's expiry recorded and real: the
				// window's end. The state's length changes with the count's
				// bytes (127 and 128), and the writes keep the TTL either way.
				exp0 := start + hourMs
				putState(t, c, stateKey(key("byte")), start, 127, exp0-start, time.Duration(exp0-now)*time.Millisecond)
				st0, real0 := stateAndExpiry(t, c, stateKey(key("byte")))
				// 128 (a byte longer), 126, 300, 100 (a byte shorter, and a
				// value of 300's high byte left behind would read 356), 101.
				want := st0.B
				for i, cost := range []int64{1, -2, 174, -200, 1} {
					req := store.Request{Key: key("byte"), Limit: big, Cost: cost}
					st, exp := write(t, path, req)
					covers(t, big, st, exp)
					want += cost
					if st.A != start || st.B != want || exp != real0 || st.A+st.C != exp0 {
						t.Fatalf("write %d (cost %d): state %+v, Redis expires the key at %d; want count %d, the expiry %d kept (Redis: %d)", i, cost, st, exp, want, exp0, real0)
					}
				}
			})

			debt := func(t *testing.T) {
				req := store.Request{Key: key("debt"), Limit: hour, Cost: 5}
				st1, exp1 := write(t, path, req)
				covers(t, hour, st1, exp1)
				req.Cost = 10 // 15 of 10: in debt until the window ends, no longer
				st2, exp2 := write(t, path, req)
				covers(t, hour, st2, exp2)
				if st2.A == st1.A && exp2 != exp1 {
					t.Fatalf("in debt the key lives as long as its window: expiry %d, was %d", exp2, exp1)
				}
			}
			if path == "settle" { // a debt is a settlement's: the other paths charge within the limit
				t.Run("a debt ends with its window", debt)
			}

			t.Run("a period that grew", func(t *testing.T) {
				req := store.Request{Key: key("grew"), Limit: minute, Cost: 1}
				st1, exp1 := write(t, path, req)
				covers(t, minute, st1, exp1)
				req.Limit = hour
				st2, exp2 := write(t, path, req)
				covers(t, hour, st2, exp2)
			})
		})
	}
}

// stateAndExpiry reads a fixed window's state at key and the key's
// expiry in Redis, Unix ms.
func stateAndExpiry(t *testing.T, c *redis.Client, key string) (algorithms.State, int64) {
	t.Helper()
	ctx := context.Background()
	v, err := c.Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	exp, err := c.PExpireTime(ctx, key).Result()
	if err != nil || exp <= 0 {
		t.Fatalf("PEXPIRETIME %s: %v, %v", key, exp, err)
	}
	return decodeCounterState(t, algorithms.FixedWindow, v), exp.Milliseconds()
}

// putState writes a fixed window's state (start, count, c) at key as the
// codec lays it out (lua/lib.lua), with the given TTL.
func putState(t *testing.T, c *redis.Client, key string, start, count, cc int64, ttl time.Duration) {
	t.Helper()
	const epochMs = 1767225600000
	minimal := func(v int64) []byte { // the fewest bytes of two's complement v
		b := binary.LittleEndian.AppendUint64(nil, uint64(v))
		n := 8
		for n > 0 && ((v >= 0 && b[n-1] == 0 && (n == 1 || b[n-2] < 0x80)) || (v < 0 && b[n-1] == 0xff && n > 1 && b[n-2] >= 0x80)) {
			n--
		}
		return b[:n]
	}
	a, cb, b := minimal(start-epochMs), minimal(cc), minimal(count)
	v := append([]byte{byte(len(a)*8 + len(cb))}, a...)
	v = append(append(v, cb...), b...)
	if err := c.Set(context.Background(), key, v, ttl).Err(); err != nil {
		t.Fatal(err)
	}
}
