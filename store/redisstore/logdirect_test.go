package redisstore

import (
	"context"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestLuaLogDirectRing: the sliding window log's function
// (lua/sliding_window_log.lua) decides and writes as Go does where its
// ring arithmetic is tight: small limits whose rings fill, wrap and
// resize often, costs of up to 4 units against rings of 7 to 10 slots (a
// run of slots that wraps past the ring's end), rings kept from a larger
// limit, dry runs, and calls of several groups, a key repeated among
// them. Every decision and, after each call, every ring (slot for
// slot, head and floor included) must be Go's; the trace must take the
// wrapping and resizing branches often.
func TestLuaLogDirectRing(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	ms := time.Millisecond
	limits := []algorithms.Limit{
		{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: 100 * ms},
		{Algorithm: algorithms.SlidingWindowLog, Requests: 7, Period: 70 * ms}, // below LOG_MIN_SLOTS
		{Algorithm: algorithms.SlidingWindowLog, Requests: 9, Period: 40 * ms},
	}
	keys := []string{"logdirect:a", "logdirect:b", "logdirect:c"}
	limitOf := []algorithms.Limit{limits[0], limits[1], limits[2]}
	m := &luaModel{states: map[string]algorithms.State{}}
	rng := rand.New(rand.NewPCG(7, 11))
	now := int64(1_780_000_000_000)
	var wraps, resizes, denials int
	for step := range 4000 {
		now += rng.Int64N(25)
		m.calMs = now
		n := 1 + rng.IntN(3)
		reqs := make([]luaReq, n)
		for i := range reqs {
			k := rng.IntN(len(keys))
			if rng.IntN(50) == 0 {
				limitOf[k] = limits[rng.IntN(len(limits))]
			}
			reqs[i] = luaReq{key: keys[k], l: limitOf[k], cost: 1 + rng.Int64N(4), dry: rng.IntN(15) == 0, group: true}
		}
		before := map[string]algorithms.State{}
		for _, k := range keys {
			before[k] = m.states[k]
		}
		want := m.decideGroups(now, reqs)
		got, err := runScriptHeader(ctx, c, header{nowMs: now, keepMs: keepMs, calMs: now}, reqs)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for i := range reqs {
			if got[i] != want[i] {
				t.Fatalf("step %d, request %d of %d (%s, %+v, cost %d, dry %v):\n got (lua) %+v\nwant (go)  %+v", step, i, n, reqs[i].key, reqs[i].l, reqs[i].cost, reqs[i].dry, got[i], want[i])
			}
			if !want[i].Allowed {
				denials++
			}
		}
		for _, k := range keys {
			st, held := m.states[k]
			if _, err := c.Get(ctx, k).Result(); (err == nil) != held {
				t.Fatalf("step %d: key %s in Redis: %v, in Go: %v", step, k, err, held)
			}
			if !held {
				continue
			}
			if inRedis := redisLogState(t, c, k); !reflect.DeepEqual(inRedis, st) {
				t.Fatalf("step %d: key %s: ring in Redis\n%+v\nin Go\n%+v", step, k, inRedis, st)
			}
			if b := before[k]; len(b.Log) > 0 && len(st.Log) == len(b.Log) && st.A < b.A {
				wraps++ // the head passed the ring's end
			} else if len(st.Log) != len(b.Log) {
				resizes++
			}
		}
	}
	if wraps < 300 || resizes < 300 || denials < 300 {
		t.Fatalf("trace too tame: %d wraps, %d resizes, %d denials", wraps, resizes, denials)
	}
	t.Logf("%d wraps, %d resizes, %d denials", wraps, resizes, denials)
}

// commandCalls is how many times Redis has run each command since its
// last CONFIG RESETSTAT, from INFO commandstats.
func commandCalls(t *testing.T, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for _, m := range regexp.MustCompile(`cmdstat_(\w+):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		calls[m[1]], _ = strconv.ParseInt(m[2], 10, 64)
	}
	return calls
}

// TestLuaLogDirectCommands: a decision on a ring that the first GETRANGE
// reads whole, up to its largest (LOG_WHOLE, 64 slots), costs Redis one
// GETRANGE and one SET; a larger ring is read and written by the slot.
func TestLuaLogDirectCommands(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	now := int64(1_780_000_000_000)
	for _, tc := range []struct {
		requests int64
		slots    int
		whole    bool
	}{{64, 64, true}, {100, 78, false}} {
		l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: tc.requests, Period: time.Hour}
		key := "logcmds:" + strconv.FormatInt(tc.requests, 10)
		for i := range int64(39) {
			if _, err := runScript(ctx, c, now+i, []luaReq{{key: key, l: l, cost: 1}}); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(redisLogState(t, c, key).Log); n != tc.slots {
			t.Fatalf("%d requests: a ring of %d slots, want %d", tc.requests, n, tc.slots)
		}
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := runScript(ctx, c, now+100, []luaReq{{key: key, l: l, cost: 1}})
		if err != nil || !got[0].Allowed || got[0].Remaining != tc.requests-40 {
			t.Fatalf("%d requests: %+v, %v; want allowed, %d remaining", tc.requests, got, err, tc.requests-40)
		}
		calls := commandCalls(t, c)
		whole := calls["getrange"] == 1 && calls["set"] == 1 && calls["setrange"] == 0
		if whole != tc.whole {
			t.Fatalf("%d requests, %d slots: commands %v; read and written whole: %v, want %v", tc.requests, tc.slots, calls, whole, tc.whole)
		}
	}
}

// TestLuaLogDirectTTL: the sliding window log writes each ring with its
// own TTL (the decision's ttl plus keep, which px_string rounds up by at
// most 1/64) though the PX strings are kept: of two rings written in one
// call, periods a minute apart, the second expires about a minute after
// the first, and each no sooner than its TTL after the call began and no
// later than its rounded TTL from now.
func TestLuaLogDirectTTL(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	period := time.Minute
	a := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: period}
	b := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: 2 * period}
	reqs := []luaReq{{key: "logttl:a", l: a, cost: 1}, {key: "logttl:b", l: b, cost: 1, group: true}}
	// The library loaded first, so the call below runs at once.
	if _, err := runScript(ctx, c, 1_780_000_000_000, []luaReq{{key: "logttl:load", l: a}}); err != nil {
		t.Fatal(err)
	}
	before, err := c.Time(ctx).Result() // Redis' clock, which its expiry times count in
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runScript(ctx, c, 1_780_000_000_000, reqs); err != nil {
		t.Fatal(err)
	}
	at := map[string]int64{}
	for _, r := range reqs {
		exp, err := c.PExpireTime(ctx, r.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := c.PTTL(ctx, r.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := time.Duration(r.l.Period.Milliseconds()+keepMs) * time.Millisecond
		if ttl > want+want/64 || ttl < want-time.Minute {
			t.Fatalf("%s: PTTL %v, want at most %v (%v rounded up by 1/64)", r.key, ttl, want+want/64, want)
		}
		if want := before.UnixMilli() + r.l.Period.Milliseconds() + keepMs; exp.Milliseconds() < want {
			t.Fatalf("%s: expires at %d ms, before the TTL from the call's start (%d)", r.key, exp.Milliseconds(), want)
		}
		at[r.key] = exp.Milliseconds()
	}
	if d := at["logttl:b"] - at["logttl:a"]; d < 60_000-(2*60_000+keepMs)/64 || d > 60_000+(2*60_000+keepMs)/64 {
		t.Fatalf("the ring of the period a minute longer expires %d ms after the other, want about 60000", d)
	}
}

// TestLuaLogUpdateInPlaceTTL: a ring too large to be read whole is
// updated in place (SETRANGE, then PEXPIRE), and its TTL is the
// decision's ttl plus keep as for a whole write.
func TestLuaLogUpdateInPlaceTTL(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 500, Period: time.Minute}
	key := "logttl:big"
	for i := range 200 {
		if _, err := runScript(ctx, c, 1_780_000_000_000+int64(i), []luaReq{{key: key, l: l, cost: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	before := commandCalls(t, c)
	if _, err := runScript(ctx, c, 1_780_000_000_500, []luaReq{{key: key, l: l, cost: 1}}); err != nil {
		t.Fatal(err)
	}
	if calls := commandCalls(t, c); calls["pexpire"] != before["pexpire"]+1 {
		t.Fatalf("commands %v after %v: want one PEXPIRE (an update in place)", calls, before)
	}
	ttl, err := c.PTTL(ctx, key).Result()
	want := time.Duration(l.Period.Milliseconds()+keepMs) * time.Millisecond
	if err != nil || ttl > want+want/64 || ttl < want-time.Minute {
		t.Fatalf("PTTL %v, %v; want at most %v (%v rounded up by 1/64)", ttl, err, want+want/64, want)
	}
}
