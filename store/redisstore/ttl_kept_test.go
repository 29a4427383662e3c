package redisstore_test

import (
	"context"
	"encoding/binary"
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

// A token bucket's key records its own expiry (lua/token_bucket.lua), and
// a write keeps the key's TTL when the expiry recorded covers what the new
// state needs. These tests attack that guard: after every write the key
// must live as long as its state needs (Go's TTL, plus ClientTime's hour)
// and at most the pad (a quarter of the TTL, a token's time or
// redisstore.TBPadMin, whichever is longest) and 1/64 longer, and the
// expiry recorded must never be later than the key's real one, whoever
// wrote the key before: a limit changed by a reload either way, a
// replica whose clock runs ahead or behind, a build that recorded no
// expiry, a FUNCTION FLUSH, a group's undo, a refund. The clocks here are
// near Redis' own, so the state takes its 12-byte form.

// tbEpochMs is lua/lib.lua's STATE_EPOCH_MS.
const tbEpochMs = 1767225600000

// keptExpiry is the expiry (Unix ms by Redis' clock) a token bucket's
// value records, and whether it records one (its 12-byte form).
func keptExpiry(v string) (int64, bool) {
	if len(v) != 12 {
		return 0, false
	}
	var b [8]byte
	copy(b[:], v[:5])
	if v[4]&0x80 != 0 {
		copy(b[5:], "\xff\xff\xff")
	}
	at := int64(binary.LittleEndian.Uint64(b[:]))
	rel := int64(int32(binary.LittleEndian.Uint32([]byte(v[8:12]))))
	return at + rel + tbEpochMs, true
}

// checkKeptKey checks the token bucket key rk after a write whose state
// needs need (Go's TTL plus keep) and whose TTL is ttl, under a limit
// whose token comes back in tok: its PTTL lies within [need, need + pad
// + 1/64], the pad the largest of ttl/4, tok and TBPadMin, and the expiry its value records,
// when it records one (it must when recorded is true), is no later than
// the key's real expiry (Redis' TIME plus its PTTL).
func checkKeptKey(t *testing.T, c redis.UniversalClient, rk string, ttl, need, tok time.Duration, recorded bool) {
	t.Helper()
	ctx := context.Background()
	const slack = 2 * time.Second
	tm, err := c.Time(ctx).Result()
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
	hi := need + max(ttl/4, tok, redisstore.TBPadMin)
	if pttl <= need-slack {
		t.Errorf("PTTL %v, but the state needs %v: the key expires while its state still counts", pttl, need)
	} else if pttl > hi+hi/64+slack {
		t.Errorf("PTTL %v, the state needs %v: the key outlives its state by more than the pad, max(%v / 4, %v, %v)", pttl, need, ttl, tok, redisstore.TBPadMin)
	}
	exp, ok := keptExpiry(v)
	if recorded && !ok {
		t.Fatalf("the value %q (%d bytes) records no expiry", v, len(v))
	}
	// The 50 ms: between TIME and PTTL; the mistakes caught are off by
	// seconds or hours.
	if real := tm.UnixMilli() + pttl.Milliseconds(); ok && exp > real+50 {
		t.Errorf("the value records the expiry %d, %d ms after the key's real one: a later write would keep a TTL too short", exp, exp-real)
	}
}

// runKeptSteps decides steps on one token-bucket key from base, each
// Go's decision, each allowed, each checked by checkKeptKey.
func runKeptSteps(t *testing.T, s store.Store, c redis.UniversalClient, key string, base time.Time, keep time.Duration, steps []ttlStep) {
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
		checkKeptKey(t, c, redisstore.StateKey(algorithms.TokenBucket, key), d.TTL, d.TTL+keep, st.l.Period/time.Duration(st.l.Requests), true)
	}
}

// nearRedis is a moment near Redis' clock (the host's, to the second),
// so a client's clock and Redis' agree.
func nearRedis() time.Time { return time.Now().Truncate(time.Second) }

func tb(n int64, p time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: n, Period: p}
}

// TestTokenBucketKeptTTLLimitChange: a rules reload changes the key's
// limit between writes. A slower rate or a debt moves the state's end far
// past the expiry recorded: the write must set the TTL again. A faster
// rate or a refund moves it earlier: the write must not keep a TTL far
// longer than the state. Writes between them that move the end by a token
// keep the TTL.
func TestTokenBucketKeptTTLLimitChange(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	s := newStore(t, c, testConfig())
	defer s.Close()
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		steps []ttlStep
	}{
		{"rate slower", []ttlStep{{ms, tb(100, time.Minute), 40, 0}, {2 * ms, tb(100, time.Minute), 1, 0}, {3 * ms, tb(100, time.Hour), 1, 0}, {4 * ms, tb(100, time.Hour), 1, 0}}},
		{"rate faster", []ttlStep{{ms, tb(100, time.Hour), 40, 0}, {2 * ms, tb(100, time.Hour), 1, 0}, {3 * ms, tb(100, 30*time.Minute), 1, 0}, {4 * ms, tb(100, 30*time.Minute), 1, 0}}},
		{"a debt", []ttlStep{{ms, tb(10, time.Hour), 8, 0}, {2 * ms, tb(10, time.Hour), 1, 0}, {3 * ms, tb(10, time.Hour), 10, algorithms.Debt}}},
		{"a refund", []ttlStep{{ms, tb(100, time.Hour), 60, 0}, {2 * ms, tb(100, time.Hour), 1, 0}, {3 * ms, tb(100, time.Hour), -50, 0}, {4 * ms, tb(100, time.Hour), 1, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runKeptSteps(t, s, c, "tbkept-"+tc.name, nearRedis(), time.Hour, tc.steps)
		})
	}
}

// TestTokenBucketKeptTTLFastLimit: a limit far above its traffic (a
// million a second) leaves a state its next token refills within a ms;
// its key lives TBPadMin beyond that, and a charge within it finds the
// key live and keeps its TTL, rather than finding it expired and making
// it again. Instants are Redis' (TIME before the write, PEXPIRETIME), so
// a pause only makes an attempt too late, and that attempt is tried
// again on a new key.
func TestTokenBucketKeptTTLFastLimit(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second}) // Redis' clock
	defer s.Close()
	l := tb(1_000_000, time.Second)
	redisMs := func() int64 {
		t.Helper()
		tm, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	expiry := func(rk string) int64 {
		t.Helper()
		at, err := c.PExpireTime(ctx, rk).Result()
		if err != nil {
			t.Fatal(err)
		}
		return at.Milliseconds()
	}
	for attempt := range 5 {
		key := fmt.Sprintf("tbfast-%d", attempt)
		rk := redisstore.StateKey(l.Algorithm, key)
		before := redisMs()
		if d := decide(t, s, time.Now(), store.Request{Key: key, Limit: l, Cost: 1})[0]; !d.Allowed || d.TTL > time.Millisecond {
			t.Fatalf("1 of a million a second: %+v, want allowed with a TTL of a ms at most", d)
		}
		at := expiry(rk)
		if at < before+redisstore.TBPadMin.Milliseconds() {
			t.Fatalf("the key expires at %d, %d ms after the clock before the write: want TBPadMin (%v) at least", at, at-before, redisstore.TBPadMin)
		}
		if d := decide(t, s, time.Now(), store.Request{Key: key, Limit: l, Cost: 1})[0]; !d.Allowed {
			t.Fatalf("the second charge: %+v, want allowed", d)
		}
		// The expiry recorded may be short of the key's by PX's rounding
		// (1/64): a write more than that before it keeps the TTL.
		if redisMs()+20 >= at {
			continue
		}
		if got := expiry(rk); got != at {
			t.Errorf("the second charge moved the key's expiry from %d to %d: want the TTL kept", at, got)
		}
		return
	}
	t.Fatal("no attempt ran in time")
}

// TestTokenBucketKeptTTLClocks: replicas deciding on their own clocks
// (Config.ClientTime, an hour kept) write one key in turn, one running two
// hours ahead of Redis or behind it, more than the hour kept. The expiry
// recorded is Redis' own, so the replica on time never keeps a TTL its
// state outlives (one recorded by the writer's clock would read two hours
// late: 200 a day, 40 spent, the state needs 41 tokens (4h55m) and two
// hours more, past the 50 (6h) plus the hour its key lives); a key
// written by a build that recorded no expiry (8 bytes) gets its TTL set.
func TestTokenBucketKeptTTLClocks(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, testConfig())
	defer s.Close()
	l := tb(200, 24*time.Hour)
	const keep = time.Hour
	for _, skew := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
		t.Run(fmt.Sprint("skew ", skew), func(t *testing.T) {
			key := fmt.Sprint("tbclock", skew)
			now := nearRedis()
			state, _ := goDecide(l, algorithms.State{}, now.Add(skew), 40, 0)
			decide(t, s, now.Add(skew), store.Request{Key: key, Limit: l, Cost: 40})
			for i := range 3 {
				var d algorithms.Decision
				state, d = goDecide(l, state, now, 1, 0)
				if got := decide(t, s, now, store.Request{Key: key, Limit: l, Cost: 1})[0]; got != d || !d.Allowed {
					t.Fatalf("charge %d on time: %+v, want Go's %+v, allowed", i, got, d)
				}
				checkKeptKey(t, c, redisstore.StateKey(l.Algorithm, key), d.TTL, d.TTL+keep, l.Period/time.Duration(l.Requests), true)
			}
		})
	}
	t.Run("no expiry recorded", func(t *testing.T) {
		// 40 of 200 a day spent, in the 8-byte form: the arrival time
		// 4h48m ahead, a TTL of a second.
		key := "tbbare"
		now := nearRedis()
		at := now.UnixMilli() + 288*60*1000 - tbEpochMs
		v := binary.LittleEndian.AppendUint64(nil, uint64(at))[:5]
		v = append(v, 0, 0, 0)
		rk := redisstore.StateKey(l.Algorithm, key)
		if err := c.Set(ctx, rk, v, time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		state := algorithms.State{A: now.UnixMilli() + 288*60*1000}
		_, d := goDecide(l, state, now, 1, 0)
		if got := decide(t, s, now, store.Request{Key: key, Limit: l, Cost: 1})[0]; got != d {
			t.Fatalf("charge on the 8-byte state: %+v, want Go's %+v", got, d)
		}
		checkKeptKey(t, c, rk, d.TTL, d.TTL+keep, l.Period/time.Duration(l.Requests), true)
	})
	t.Run("a call that reads no clock", func(t *testing.T) {
		// A new store's first call carries no deadline, so the script
		// reads Redis' clock only when a write needs it: never the clock
		// of a call seconds before (the library, loaded once, outlives
		// calls). 500 of 1000 every 2 s: the state needs a second, the
		// key an hour and 1.25 s more (4.48 s, PX rounded up); five
		// seconds later, on the simulated clock a ms later, a charge
		// needs it an hour and a second from then: kept on the old
		// clock, it would be 1.5 s short.
		key := "tbclockless"
		fast := tb(1000, 2*time.Second)
		now := nearRedis()
		state, _ := goDecide(fast, algorithms.State{}, now, 500, 0)
		decide(t, s, now, store.Request{Key: key, Limit: fast, Cost: 500})
		time.Sleep(5 * time.Second)
		s2 := newStore(t, c, testConfig())
		defer s2.Close()
		_, d := goDecide(fast, state, now.Add(time.Millisecond), 1, 0)
		if got := decide(t, s2, now.Add(time.Millisecond), store.Request{Key: key, Limit: fast, Cost: 1})[0]; got != d || !d.Allowed {
			t.Fatalf("charge: %+v, want Go's %+v, allowed", got, d)
		}
		if pttl := c.PTTL(ctx, redisstore.StateKey(fast.Algorithm, key)).Val(); pttl < d.TTL+keep-500*time.Millisecond {
			t.Errorf("PTTL %v, the state needs %v", pttl, d.TTL+keep)
		}
	})
	t.Run("FUNCTION FLUSH between writes", func(t *testing.T) {
		key := "tbflush"
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
		checkKeptKey(t, c, redisstore.StateKey(l.Algorithm, key), d.TTL, d.TTL+keep, l.Period/time.Duration(l.Requests), true)
	})
}

// TestTokenBucketKeptTTLGroupUndo: a group whose write set a shorter TTL
// on a token bucket's key (its limit made faster, or a refund) and whose
// last request is denied puts the key back with the bytes and the TTL it
// had, so the expiry it records is still no later than its real one, and
// the next charge under the old limit, which keeps a TTL the recorded
// expiry covers, leaves the key living as long as its state needs.
func TestTokenBucketKeptTTLGroupUndo(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, testConfig())
	defer s.Close()
	const keep = time.Hour
	slow := tb(100, time.Hour)
	for _, tc := range []struct {
		name string
		at   time.Duration // the group's moment after the first charge
		req  store.Request
	}{
		{"a faster limit", time.Millisecond, store.Request{Limit: tb(100, time.Minute), Cost: 1}},
		{"a refund", time.Millisecond, store.Request{Limit: slow, Cost: -30}},
		// 40 of 100 an hour come back in 24 minutes: a charge 20
		// minutes on needs the key 4 minutes and a token, far less
		// than the TTL set for 24.
		{"a charge 20 minutes on", 20 * time.Minute, store.Request{Limit: slow, Cost: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, other := "tbundo-"+tc.name, "tbundo-full-"+tc.name
			full := store.Request{Key: other, Limit: tb(1, time.Hour), Cost: 1}
			now := nearRedis()
			decide(t, s, now, full)
			state, _ := goDecide(slow, algorithms.State{}, now, 40, 0)
			decide(t, s, now, store.Request{Key: key, Limit: slow, Cost: 40})
			rk := redisstore.StateKey(algorithms.TokenBucket, key)
			before := c.Get(ctx, rk).Val()
			req := tc.req
			req.Key = key
			out := decide(t, s, now.Add(tc.at), req, full)
			if out[1].Allowed {
				t.Fatalf("the full key's request was allowed: %+v", out)
			}
			if after := c.Get(ctx, rk).Val(); after != before {
				t.Fatalf("after the denied group the key holds %q, want %q", after, before)
			}
			_, d0 := goDecide(slow, algorithms.State{}, now, 40, 0)
			checkKeptKey(t, c, rk, d0.TTL, d0.TTL+keep, time.Hour/100, true)
			if tc.at > time.Millisecond {
				return // the next charge may shorten the TTL set for 24 minutes
			}
			_, d := goDecide(slow, state, now.Add(tc.at), 1, 0)
			if got := decide(t, s, now.Add(tc.at), store.Request{Key: key, Limit: slow, Cost: 1})[0]; got != d {
				t.Fatalf("the next charge: %+v, want Go's %+v", got, d)
			}
			checkKeptKey(t, c, rk, d.TTL, d.TTL+keep, time.Hour/100, true)
		})
	}
}

// TestTokenBucketKeptTTLTrace: along a random trace on Redis' clock (the
// production default: no hour kept; 20 a second, so a TTL short by a
// moment shows) of charges, refunds, debts and looks, after every call
// the key lives at least as long as a look says its state matters, and
// records no expiry later than its own. Seeded by the clock: a failure
// logs its seed.
func TestTokenBucketKeptTTLTrace(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	const slack = 30 * time.Millisecond
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second})
	defer s.Close()
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	l := tb(20, time.Second)
	key := fmt.Sprintf("tbtrace-%d", seed)
	rk := redisstore.StateKey(l.Algorithm, key)
	for i := range 60 {
		cost := rng.Int64N(12) - 3
		var mode algorithms.Mode
		if rng.IntN(4) == 0 {
			mode = algorithms.Debt
		}
		decide(t, s, time.Now(), store.Request{Key: key, Limit: l, Cost: cost, Mode: mode})
		look := decide(t, s, time.Now(), store.Request{Key: key, Limit: l})[0]
		tm := c.Time(ctx).Val()
		pttl := c.PTTL(ctx, rk).Val()
		if look.TTL > slack && pttl < look.TTL-slack {
			t.Fatalf("seed %d, step %d (cost %d mode %d): PTTL %v, the state needs %v", seed, i, cost, mode, pttl, look.TTL)
		}
		if exp, ok := keptExpiry(c.Get(ctx, rk).Val()); ok && exp > tm.UnixMilli()+pttl.Milliseconds()+50 {
			t.Fatalf("seed %d, step %d: the value records the expiry %d, the key's is %d", seed, i, exp, tm.UnixMilli()+pttl.Milliseconds())
		}
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
	}
}
