package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// A sliding window's and a leaky bucket's key record their own expiry
// in the second form of the three-integer codec (lua/lib.lua), and a write
// keeps the key's TTL when the expiry recorded covers what the new state
// needs and exceeds it by at most the pad (none for a sliding window,
// whose state's end holds for a window; a leaky bucket's as the token
// bucket's: a quarter of its TTL, at least a unit's time) and 1/64. These
// tests attack that guard as ttl_kept_test.go attacks the token bucket's:
// after every write the key must live as long as its state needs (Go's
// TTL, plus ClientTime's hour) and at most the pad and 1/64 longer, and
// the expiry recorded must never be later than the key's real one,
// whoever wrote the key before: a limit changed by a reload either way, a
// period that grows or a calendar one, a debt, a replica whose clock runs
// hours ahead or behind, v0.2.0's first-form states, a FUNCTION FLUSH, a
// group's undo, a refund.

// counterExpiry is the expiry (Unix ms by Redis' clock) a three-integer
// state of alg records, and whether it records one: the second form
// (header byte 64 + len(a) * 8 + len(c), then len(e), a, c, e, b; e ms
// after the time field, 0 for none).
func counterExpiry(alg algorithms.Algorithm, v string) (int64, bool) {
	if len(v) < 2 || v[0] < 64 || v[0] >= 128 {
		return 0, false
	}
	h := int(v[0]) - 64
	la, lc, le := h>>3, h&7, int(v[1])
	if 2+la+lc+le > len(v) {
		return 0, false
	}
	a := leInt(v[2 : 2+la])
	e := leInt(v[2+la+lc : 2+la+lc+le])
	b := leInt(v[2+la+lc+le:])
	if e == 0 {
		return 0, false
	}
	if alg == algorithms.LeakyBucket {
		return b + tbEpochMs + e, true
	}
	return a + tbEpochMs + e, true
}

// counterState is the state a three-integer value of alg holds (either
// form), and whether it is whole with a, c and b each in the fewest
// bytes it needs.
func counterState(alg algorithms.Algorithm, v string) (algorithms.State, bool) {
	if len(v) < 1 || v[0] >= 128 {
		return algorithms.State{}, false
	}
	h, at, le := int(v[0]), 1, 0
	if h >= 64 {
		if len(v) < 2 {
			return algorithms.State{}, false
		}
		h, at, le = h-64, 2, int(v[1])
	}
	la, lc := h>>3, h&7
	if at+la+lc+le > len(v) {
		return algorithms.State{}, false
	}
	a := leInt(v[at : at+la])
	c := leInt(v[at+la : at+la+lc])
	b := leInt(v[at+la+lc+le:])
	minimal := la == minBytes(a) && lc == minBytes(c) && len(v)-at-la-lc-le == minBytes(b)
	if alg == algorithms.LeakyBucket {
		return algorithms.State{A: a, B: b + tbEpochMs, C: c}, minimal
	}
	return algorithms.State{A: a + tbEpochMs, B: b, C: c}, minimal
}

// leInt reads a little-endian two's complement integer of len(s) bytes
// (0 for none).
func leInt(s string) int64 {
	var u uint64
	for i := len(s) - 1; i >= 0; i-- {
		u = u<<8 | uint64(s[i])
	}
	if n := len(s); n > 0 && n < 8 && s[n-1]&0x80 != 0 {
		u |= ^uint64(0) << (8 * n)
	}
	return int64(u)
}

// counterPad is the most a write may let l's key outlive a state whose
// TTL is ttl, beyond px_string's 1/64: none for a sliding window, for a
// leaky bucket the larger of ttl/4 and a unit's time.
func counterPad(l algorithms.Limit, ttl time.Duration) time.Duration {
	if l.Algorithm != algorithms.LeakyBucket {
		return 0
	}
	return max(ttl/4, l.Period/time.Duration(l.Requests))
}

// checkCounterKey checks the key rk of l after a write whose state needs
// need (Go's TTL plus keep) and whose TTL is ttl: its PTTL lies within
// [need, need + pad + 1/64] (counterPad; with bounded false, only the
// lower bound), and the expiry its value records, if any, is no later
// than the key's real one (PEXPIRETIME). It answers whether
// the value records an expiry.
func checkCounterKey(t *testing.T, c redis.UniversalClient, l algorithms.Limit, rk string, ttl, need time.Duration, bounded bool) bool {
	t.Helper()
	ctx := context.Background()
	const slack = 2 * time.Second
	at, err := c.PExpireTime(ctx, rk).Result()
	if err != nil {
		t.Fatal(err)
	}
	pttl, err := c.PTTL(ctx, rk).Result()
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Get(ctx, rk).Result()
	if err != nil {
		t.Fatalf("%s: %v", rk, err)
	}
	hi := need + counterPad(l, ttl)
	if pttl <= need-slack {
		t.Errorf("PTTL %v, but the state needs %v: the key expires while its state still counts", pttl, need)
	} else if bounded && pttl > hi+hi/64+slack {
		t.Errorf("PTTL %v, the state needs %v: the key outlives its state by more than the pad (%v) and 1/64", pttl, need, counterPad(l, ttl))
	}
	exp, ok := counterExpiry(l.Algorithm, v)
	if real := at.Milliseconds(); ok && exp > real {
		t.Errorf("the value records the expiry %d, %d ms after the key's real one: a later write would keep a TTL too short", exp, exp-real)
	}
	return ok
}

// runCounterSteps decides steps on one key from base, each Go's decision,
// each allowed, each checked by checkCounterKey; recorded lists the steps
// after which the value must record an expiry.
func runCounterSteps(t *testing.T, s store.Store, c redis.UniversalClient, key string, base time.Time, keep time.Duration, steps []ttlStep, recorded ...int) {
	t.Helper()
	var state algorithms.State
	for i, st := range steps {
		now := base.Add(st.at)
		d := decide(t, s, now, store.Request{Key: key, Limit: st.l, Cost: st.cost, Mode: st.mode})[0]
		next, model := goDecide(st.l, state, now, st.cost, st.mode)
		model.Debt = 0 // Decide does not report it
		if d != model {
			t.Fatalf("step %d (cost %d under %v): %+v, want Go's %+v", i, st.cost, st.l, d, model)
		}
		if !d.Allowed {
			t.Fatalf("step %d: denied; the test means every step to write", i)
		}
		state = next
		t.Logf("step %d (cost %d under %v): TTL %v", i, st.cost, st.l, d.TTL)
		rk := redisstore.StateKey(st.l.Algorithm, key)
		if got, ok := counterState(st.l.Algorithm, c.Get(context.Background(), rk).Val()); !ok || got.A != next.A || got.B != next.B || got.C != next.C {
			t.Errorf("step %d: the key holds %+v (whole, each field in its fewest bytes: %v), want Go's %+v", i, got, ok, next)
		}
		ok := checkCounterKey(t, c, st.l, rk, d.TTL, d.TTL+keep, true)
		for _, r := range recorded {
			if r == i && !ok {
				t.Errorf("step %d: the value records no expiry", i)
			}
		}
	}
}

// redisNow is Redis' clock truncated to d: windows of periods dividing d
// start there.
func redisNow(t *testing.T, c redis.UniversalClient, d time.Duration) time.Time {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UTC().Truncate(d)
}

func swl(n int64, p time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: n, Period: p}
}

func swCal(n int64, cal algorithms.Calendar) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: n, Calendar: cal}
}

func lbl(n int64, p time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: n, Period: p}
}

// TestCounterKeptTTLLimitChange: a rules reload changes the key's limit
// between writes. A longer period, fewer requests (a stored count turned
// into a debt), a debt, a calendar period of more days, a slower leaky
// rate move the state's end past the expiry recorded: the write must set
// the TTL again. A shorter period, more requests than a debt, a refund of
// a window's count, a calendar period of fewer days move it earlier: the
// write must not keep a TTL far longer than the state. Writes between
// them that leave the end where it was (a sliding window) or move it by a
// unit (a leaky bucket) keep the TTL. The base is Redis' clock truncated
// to a multiple of every period of the case, so the stored window start
// is a window start of the new limit and its counts are read on.
func TestCounterKeptTTLLimitChange(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	s := newStore(t, c, testConfig())
	defer s.Close()
	const keep = time.Hour
	ms := time.Millisecond
	h := time.Hour
	day := 24 * h
	ten := 10 * time.Minute
	for _, tc := range []struct {
		name     string
		trunc    time.Duration
		steps    []ttlStep
		recorded []int
	}{
		{"window longer", 2 * h, []ttlStep{{ms, swl(10, h), 5, 0}, {2 * ms, swl(10, h), 1, 0}, {3 * ms, swl(10, 2*h), 1, 0}, {4 * ms, swl(10, 2*h), 1, 0}}, []int{0, 1, 2, 3}},
		{"window shorter", day, []ttlStep{{ms, swl(10, day), 5, 0}, {2 * ms, swl(10, day), 1, 0}, {3 * ms, swl(10, h), 1, 0}, {4 * ms, swl(10, h), 1, 0}}, []int{0, 1, 2, 3}},
		{"window, fewer requests and a debt", h, []ttlStep{{ms, swl(10, h), 8, 0}, {2 * ms, swl(5, h), 1, algorithms.Debt}, {3 * ms, swl(5, h), 1, algorithms.Debt}}, []int{0, 1, 2}},
		{"window, more requests than a debt", h, []ttlStep{{ms, swl(10, h), 12, algorithms.Debt}, {2 * ms, swl(20, h), 1, 0}, {3 * ms, swl(20, h), 1, 0}}, []int{0, 1, 2}},
		// 5 in one window of ten minutes weigh on the next: a refund of
		// the next window's 2 leaves the state's end a window earlier.
		{"window, a refund of the count", ten, []ttlStep{{ms, swl(10, ten), 5, 0}, {ten + ms, swl(10, ten), 2, 0}, {ten + 2*ms, swl(10, ten), 1, 0}, {ten + 3*ms, swl(10, ten), -3, 0}, {ten + 4*ms, swl(10, ten), 1, 0}}, []int{0, 1, 2, 3, 4}},
		// A kept charge whose count outgrows its byte takes the first
		// form (13 bytes would not fit), its count in two bytes.
		{"window, a count past one byte", h, []ttlStep{{ms, swl(1000, h), 120, 0}, {2 * ms, swl(1000, h), 10, 0}, {3 * ms, swl(1000, h), 1, 0}}, []int{0}},
		{"calendar day to week", day, []ttlStep{{ms, swCal(10, algorithms.Day), 5, 0}, {2 * ms, swCal(10, algorithms.Day), 1, 0}, {3 * ms, swCal(10, algorithms.Week), 1, 0}, {4 * ms, swCal(10, algorithms.Week), 1, 0}}, []int{0, 1}},
		{"calendar day to month", day, []ttlStep{{ms, swCal(10, algorithms.Day), 5, 0}, {2 * ms, swCal(10, algorithms.Month), 1, 0}}, []int{0}},
		{"calendar month to day", day, []ttlStep{{ms, swCal(10, algorithms.Month), 5, 0}, {2 * ms, swCal(10, algorithms.Day), 1, 0}, {3 * ms, swCal(10, algorithms.Day), 1, 0}}, []int{1, 2}},
		{"leaky, rate slower", h, []ttlStep{{ms, lbl(100, time.Minute), 40, 0}, {2 * ms, lbl(100, time.Minute), 1, 0}, {3 * ms, lbl(100, h), 1, 0}, {4 * ms, lbl(100, h), 1, 0}}, []int{0, 1, 2, 3}},
		{"leaky, rate faster", h, []ttlStep{{ms, lbl(100, h), 40, 0}, {2 * ms, lbl(100, h), 1, 0}, {3 * ms, lbl(100, 30*time.Minute), 1, 0}, {4 * ms, lbl(100, 30*time.Minute), 1, 0}}, []int{0, 1, 2, 3}},
		{"leaky, a debt", h, []ttlStep{{ms, lbl(10, h), 8, 0}, {2 * ms, lbl(10, h), 1, 0}, {3 * ms, lbl(10, h), 10, algorithms.Debt}}, []int{0, 1, 2}},
		{"leaky, a give-back", h, []ttlStep{{ms, lbl(100, h), 40, 0}, {2 * ms, lbl(100, h), -20, 0}, {3 * ms, lbl(100, h), 1, 0}}, []int{0, 1, 2}},
		// 3 units a ms (30 in 10 s): a kept charge leaves the end a third
		// of a ms past a whole ms where the state read had none, so the
		// fraction takes a byte the value read had not.
		// From 1 unit a ms (10 in 10 s) to 3 (30 in 20 s): a kept charge
		// of 3, whose end falls on a whole ms as the state read's, still
		// writes the new rate's unit.
		{"leaky, another unit", h, []ttlStep{{ms, lbl(10, 10*time.Second), 2, 0}, {2 * ms, lbl(30, 20*time.Second), 3, 0}, {3 * ms, lbl(30, 20*time.Second), 1, 0}}, []int{0, 1, 2}},
		{"leaky, a fraction of a ms", h, []ttlStep{{ms, lbl(30, 10*time.Second), 3, 0}, {2 * ms, lbl(30, 10*time.Second), 1, 0}, {3 * ms, lbl(30, 10*time.Second), 1, 0}, {4 * ms, lbl(30, 10*time.Second), 1, 0}}, []int{0, 1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runCounterSteps(t, s, c, "ctrkept-"+tc.name, redisNow(t, c, tc.trunc), keep, tc.steps, tc.recorded...)
		})
	}
}

// TestCounterKeptTTLClocks: replicas deciding on their own clocks
// (Config.ClientTime, an hour kept) write one key in turn, one running two
// hours ahead of Redis or behind it, more than the hour kept. The expiry
// recorded is Redis' own, so the replica on time never keeps a TTL its
// state outlives (one recorded by the writer's clock, two hours ahead,
// would read the key's end two hours late); a key in v0.2.0's first form,
// or in the second form with no expiry (e = 0), gets its TTL set.
func TestCounterKeptTTLClocks(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, testConfig())
	defer s.Close()
	const keep = time.Hour
	for _, l := range []algorithms.Limit{swl(200, 24*time.Hour), lbl(200, 24*time.Hour)} {
		for _, skew := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
			t.Run(fmt.Sprint(l.Algorithm, " skew ", skew), func(t *testing.T) {
				key := fmt.Sprint("ctrclock", l.Algorithm, skew)
				now := nearRedis()
				state, _ := goDecide(l, algorithms.State{}, now.Add(skew), 40, 0)
				decide(t, s, now.Add(skew), store.Request{Key: key, Limit: l, Cost: 40})
				for i := range 3 {
					var d algorithms.Decision
					state, d = goDecide(l, state, now, 1, 0)
					if got := decide(t, s, now, store.Request{Key: key, Limit: l, Cost: 1})[0]; got != d || !d.Allowed {
						t.Fatalf("charge %d on time: %+v, want Go's %+v, allowed", i, got, d)
					}
					checkCounterKey(t, c, l, redisstore.StateKey(l.Algorithm, key), d.TTL, d.TTL+keep, true)
				}
			})
		}
		for _, form := range []string{"first form", "no expiry"} {
			t.Run(fmt.Sprint(l.Algorithm, " ", form), func(t *testing.T) {
				// 40 of 200 a day spent, written with a TTL of a second:
				// v0.2.0's first form, or the second with e = 0.
				key := fmt.Sprint("ctrbare", l.Algorithm, form)
				now := nearRedis()
				state, _ := goDecide(l, algorithms.State{}, now, 40, 0)
				rk := redisstore.StateKey(l.Algorithm, key)
				if err := c.Set(ctx, rk, packCounter(l.Algorithm, state, form == "no expiry"), time.Second).Err(); err != nil {
					t.Fatal(err)
				}
				_, d := goDecide(l, state, now, 1, 0)
				if got := decide(t, s, now, store.Request{Key: key, Limit: l, Cost: 1})[0]; got != d {
					t.Fatalf("charge on the state written: %+v, want Go's %+v", got, d)
				}
				if !checkCounterKey(t, c, l, rk, d.TTL, d.TTL+keep, true) {
					t.Errorf("the write records no expiry")
				}
			})
		}
		t.Run(fmt.Sprint(l.Algorithm, " a call that reads no clock"), func(t *testing.T) {
			// A new store's first call carries no deadline, so the script
			// reads Redis' clock only when a write needs it: never the
			// clock of a call seconds before (the library, loaded once,
			// outlives calls). Five seconds after a charge, on the
			// simulated clock a ms later, a charge needs the key five
			// seconds longer from Redis' clock than the first did: kept
			// on the old clock, the key would expire five seconds early.
			// 500 of 1000 every 2 s: PX rounds by 4,096 ms at most,
			// less than the five seconds.
			key := fmt.Sprint("ctrclockless", l.Algorithm)
			l := l
			l.Requests, l.Period = 1000, 2*time.Second
			now := nearRedis()
			state, _ := goDecide(l, algorithms.State{}, now, 500, 0)
			decide(t, s, now, store.Request{Key: key, Limit: l, Cost: 500})
			time.Sleep(5 * time.Second)
			s2 := newStore(t, c, testConfig())
			defer s2.Close()
			_, d := goDecide(l, state, now.Add(time.Millisecond), 1, 0)
			if got := decide(t, s2, now.Add(time.Millisecond), store.Request{Key: key, Limit: l, Cost: 1})[0]; got != d || !d.Allowed {
				t.Fatalf("charge: %+v, want Go's %+v, allowed", got, d)
			}
			if pttl := c.PTTL(ctx, redisstore.StateKey(l.Algorithm, key)).Val(); pttl < d.TTL+keep-500*time.Millisecond {
				t.Errorf("PTTL %v, the state needs %v", pttl, d.TTL+keep)
			}
		})
		t.Run(fmt.Sprint(l.Algorithm, " FUNCTION FLUSH between writes"), func(t *testing.T) {
			key := fmt.Sprint("ctrflush", l.Algorithm)
			now := nearRedis()
			state, _ := goDecide(l, algorithms.State{}, now, 40, 0)
			decide(t, s, now, store.Request{Key: key, Limit: l, Cost: 40})
			if err := c.FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			_, d := goDecide(l, state, now.Add(time.Millisecond), 1, 0)
			if got := decide(t, s, now.Add(time.Millisecond), store.Request{Key: key, Limit: l, Cost: 1})[0]; got != d {
				t.Fatalf("charge after the flush: %+v, want Go's %+v", got, d)
			}
			checkCounterKey(t, c, l, redisstore.StateKey(l.Algorithm, key), d.TTL, d.TTL+keep, true)
		})
	}
}

// TestCounterKeptTTLExpiryWidth: a replica running 12,300 s ahead of
// Redis (ClientTime, an hour kept) charges a leaky bucket of 200 a day (a
// unit of 432 s) twice. The first write records an expiry just within
// 3 bytes of its state's end (-2^23 + 178,592 ms); the second keeps the
// TTL and moves the end by a unit, so the expiry recorded lies 2^23 ms
// and more before it: the value must take 4 bytes for it, and never
// record an expiry later than the key's.
func TestCounterKeptTTLExpiryWidth(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, testConfig())
	defer s.Close()
	const keep = time.Hour
	l := lbl(200, 24*time.Hour)
	key := "ctrwidth"
	rk := redisstore.StateKey(l.Algorithm, key)
	now := nearRedis().Add(12300 * time.Second)
	var state algorithms.State
	for i := range 2 {
		var d algorithms.Decision
		at := now.Add(time.Duration(i) * time.Millisecond)
		state, d = goDecide(l, state, at, 1, 0)
		if got := decide(t, s, at, store.Request{Key: key, Limit: l, Cost: 1})[0]; got != d || !d.Allowed {
			t.Fatalf("charge %d: %+v, want Go's %+v, allowed", i, got, d)
		}
		if !checkCounterKey(t, c, l, rk, d.TTL, d.TTL+keep, true) {
			t.Errorf("charge %d: the value records no expiry", i)
		}
		v := c.Get(ctx, rk).Val()
		if want := 3 + i; len(v) < 2 || int(v[1]) != want {
			t.Errorf("charge %d: the value %q records its expiry in %d bytes, want %d", i, v, v[1], want)
		}
	}
}

// packCounter is s, the state of a sliding window or a leaky bucket, as
// lua/lib.lua's codec writes it: the first form (v0.2.0's), or with none
// the second form recording no expiry (e = 0 in 4 bytes).
func packCounter(alg algorithms.Algorithm, s algorithms.State, none bool) string {
	a, b := s.A-tbEpochMs, s.B
	if alg == algorithms.LeakyBucket {
		a, b = s.A, s.B-tbEpochMs
	}
	put := func(v int64) string {
		n := minBytes(v)
		out := make([]byte, n)
		for i := range n {
			out[i] = byte(v >> (8 * i))
		}
		return string(out)
	}
	pa, pc, pb := put(a), put(s.C), put(b)
	h := byte(len(pa)*8 + len(pc))
	if none {
		return string([]byte{64 + h, 4}) + pa + pc + "\x00\x00\x00\x00" + pb
	}
	return string([]byte{h}) + pa + pc + pb
}

// minBytes is the fewest bytes two's complement v needs, 0 for 0.
func minBytes(v int64) int {
	n := 0
	for lo, hi := int64(0), int64(0); v < lo || v > hi; n++ {
		lo, hi = -(int64(1) << (8*(n+1) - 1)), int64(1)<<(8*(n+1)-1)-1
	}
	return n
}

// TestCounterKeptTTLGroupUndo: a group whose write set a shorter TTL on a
// sliding window's or a leaky bucket's key (a shorter period, a refund of
// the window's count, a charge long after the first) and whose last
// request is denied puts the key back with the bytes and the TTL it had,
// so the expiry it records is still no later than its real one, and the
// next charge, which may keep a TTL the recorded expiry covers, leaves the
// key living as long as its state needs.
func TestCounterKeptTTLGroupUndo(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, testConfig())
	defer s.Close()
	const keep = time.Hour
	h := time.Hour
	for _, tc := range []struct {
		name  string
		l     algorithms.Limit
		at    time.Duration // the group's moment after the first charge
		req   store.Request
		again bool // a charge under l at the group's moment follows
	}{
		{"window shorter", swl(10, h), time.Millisecond, store.Request{Limit: swl(10, time.Minute), Cost: 1}, true},
		{"window, a refund of the count", swl(10, h), h, store.Request{Limit: swl(10, h), Cost: 1}, false},
		// 40 of 100 an hour leave in 24 minutes: a charge 20 minutes on
		// needs the key 4 minutes and a unit, far less than the TTL set
		// for 24.
		{"leaky, a charge 20 minutes on", lbl(100, h), 20 * time.Minute, store.Request{Limit: lbl(100, h), Cost: 1}, false},
		{"leaky, rate faster", lbl(100, h), time.Millisecond, store.Request{Limit: lbl(100, time.Minute), Cost: 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, other := "ctrundo-"+tc.name, "ctrundo-full-"+tc.name
			full := store.Request{Key: other, Limit: swl(1, h), Cost: 1}
			now := redisNow(t, c, h)
			decide(t, s, now, full)
			cost := int64(40)
			if tc.l.Algorithm == algorithms.SlidingWindow {
				cost = 5
			}
			state, d0 := goDecide(tc.l, algorithms.State{}, now, cost, 0)
			decide(t, s, now, store.Request{Key: key, Limit: tc.l, Cost: cost})
			rk := redisstore.StateKey(tc.l.Algorithm, key)
			before := c.Get(ctx, rk).Val()
			if !checkCounterKey(t, c, tc.l, rk, d0.TTL, d0.TTL+keep, true) {
				t.Fatalf("the first charge's value %q records no expiry", before)
			}
			reqs := []store.Request{tc.req, full}
			reqs[0].Key = key
			if tc.name == "window, a refund of the count" {
				// A charge in the next window, then a refund of it: the
				// state's end a window earlier than the charge's.
				reqs = []store.Request{{Key: key, Limit: tc.l, Cost: 1}, {Key: key, Limit: tc.l, Cost: -1}, full}
			}
			out := decide(t, s, now.Add(tc.at), reqs...)
			if out[len(out)-1].Allowed {
				t.Fatalf("the full key's request was allowed: %+v", out)
			}
			if after := c.Get(ctx, rk).Val(); after != before {
				t.Fatalf("after the denied group the key holds %q, want %q", after, before)
			}
			// The group's first write may have set a longer TTL, which its
			// undo keeps: only the lower bound holds.
			checkCounterKey(t, c, tc.l, rk, d0.TTL, d0.TTL+keep, false)
			if !tc.again {
				return
			}
			_, d := goDecide(tc.l, state, now.Add(tc.at), 1, 0)
			if got := decide(t, s, now.Add(tc.at), store.Request{Key: key, Limit: tc.l, Cost: 1})[0]; got != d {
				t.Fatalf("the next charge: %+v, want Go's %+v", got, d)
			}
			checkCounterKey(t, c, tc.l, rk, d.TTL, d.TTL+keep, true)
		})
	}
}

// TestCounterKeptTTLTrace: along a random trace on Redis' clock (the
// production default: no hour kept; 20 a second, so a TTL short by a
// moment shows) of charges, refunds, debts and looks, after every call a
// sliding window's and a leaky bucket's key lives at least as long as a
// look says its state matters, and records no expiry later than its own.
// Seeded by the clock: a failure logs its seed.
func TestCounterKeptTTLTrace(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	const slack = time.Millisecond // PX and PEXPIRETIME are whole milliseconds
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second})
	defer s.Close()
	seed := time.Now().UnixNano()
	for _, l := range []algorithms.Limit{swl(20, time.Second), lbl(20, time.Second)} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 3))
			key := fmt.Sprintf("ctrtrace-%d", seed)
			rk := redisstore.StateKey(l.Algorithm, key)
			kept := 0
			for i := range 80 {
				cost := rng.Int64N(12) - 3
				var mode algorithms.Mode
				if rng.IntN(4) == 0 {
					mode = algorithms.Debt
				}
				decide(t, s, time.Now(), store.Request{Key: key, Limit: l, Cost: cost, Mode: mode})
				// The look runs on Redis' clock at or after before, so its
				// state matters until before + look.TTL at least; the key's
				// expiry is read as an instant (PEXPIRETIME), so no pause
				// between the commands can fail the test.
				before := c.Time(ctx).Val().UnixMilli()
				look := decide(t, s, time.Now(), store.Request{Key: key, Limit: l})[0]
				at := c.PExpireTime(ctx, rk).Val().Milliseconds()
				if look.TTL > slack && at < before+(look.TTL-slack).Milliseconds() {
					t.Fatalf("seed %d, step %d (cost %d mode %d): the key expires at %d, the state needs it until %d at least", seed, i, cost, mode, at, before+look.TTL.Milliseconds())
				}
				exp, ok := counterExpiry(l.Algorithm, c.Get(ctx, rk).Val())
				if ok && exp > at {
					t.Fatalf("seed %d, step %d: the value records the expiry %d, the key's is %d", seed, i, exp, at)
				}
				if ok {
					kept++
				}
				time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
			}
			if kept == 0 {
				t.Errorf("seed %d: no state recorded its expiry", seed)
			}
		})
	}
}

// TestCounterKeptTTLMemory: a sliding window's and a leaky bucket's key
// whose writes record its expiry (the second form, 12 bytes at most) and
// keep its TTL still holds an embedded string (Redis' object header and
// the value in one allocation, as a first-form state's SET made it), so
// a key takes no more memory than before: SETRANGE would leave a raw
// string, a second allocation.
func TestCounterKeptTTLMemory(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second})
	defer s.Close()
	for _, l := range []algorithms.Limit{swl(100, time.Hour), lbl(100, time.Hour)} {
		key := fmt.Sprint("ctrmem", l.Algorithm)
		rk := redisstore.StateKey(l.Algorithm, key)
		for i := range 3 {
			if d := decide(t, s, time.Now(), store.Request{Key: key, Limit: l, Cost: 1})[0]; !d.Allowed {
				t.Fatalf("%v, charge %d: %+v", l.Algorithm, i, d)
			}
			v := c.Get(ctx, rk).Val()
			if _, ok := counterExpiry(l.Algorithm, v); !ok || len(v) > 12 {
				t.Fatalf("%v, charge %d: the value %q (%d bytes) records no expiry, or takes more than 12 bytes", l.Algorithm, i, v, len(v))
			}
			if enc := c.ObjectEncoding(ctx, rk).Val(); enc != "embstr" {
				t.Errorf("%v, charge %d: OBJECT ENCODING %s, want embstr", l.Algorithm, i, enc)
			}
		}
	}
}
