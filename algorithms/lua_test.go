package algorithms_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
)

// luaSeedEnv overrides the differential test's random seed, to replay a
// failure: FLOODGATE_LUA_SEED=1234 go test -run TestLuaMatchesGo ./algorithms/
const luaSeedEnv = "FLOODGATE_LUA_SEED"

// luaTraceEnv, when set, logs every request of the differential trace with
// the model's decision.
const luaTraceEnv = "FLOODGATE_LUA_TRACE"

// keepMs keeps every key an hour longer than its TTL: the test's clock is
// simulated, so Redis must not expire a key that the simulated time still
// needs. State past its TTL decides like no state, so keeping it longer
// never changes a decision.
const keepMs = int64(time.Hour / time.Millisecond)

// luaReq is one request of a batch: a key, a limit and a cost.
type luaReq struct {
	key  string
	l    algorithms.Limit
	cost int64
	dry  bool
	// group starts a new group: an independent all-or-nothing Decide
	// call sharing the script call (ignored on the first request).
	group bool
}

// luaModel is the Go reference for the batch script: the store.Store
// contract built from algorithms.DecideMs. states holds what Redis should
// hold; a key is absent when it was never written or its TTL was 0.
type luaModel struct {
	states map[string]algorithms.State
}

// decideGroups runs reqs as the script does: each group (see luaReq.group)
// an all-or-nothing batch of its own, one after another.
func (m *luaModel) decideGroups(nowMs int64, reqs []luaReq) []algorithms.Decision {
	var out []algorithms.Decision
	start := 0
	for i := 1; i <= len(reqs); i++ {
		if i == len(reqs) || reqs[i].group {
			out = append(out, m.decide(nowMs, reqs[start:i])...)
			start = i
		}
	}
	return out
}

// decide runs one all-or-nothing batch at nowMs.
func (m *luaModel) decide(nowMs int64, reqs []luaReq) []algorithms.Decision {
	work := map[string]algorithms.State{}
	ttl := map[string]time.Duration{}
	var changed []string
	out := make([]algorithms.Decision, len(reqs))
	denied := false
	for i, r := range reqs {
		s, ok := work[r.key]
		if !ok {
			s = m.states[r.key]
			work[r.key] = s
		}
		s2, d := algorithms.DecideMs(r.l, s, nowMs, r.cost)
		out[i] = d
		if r.cost > 0 && !d.Allowed {
			denied = true
		}
		if !r.dry && d.Allowed && r.cost != 0 {
			if _, seen := ttl[r.key]; !seen {
				changed = append(changed, r.key)
			}
			work[r.key], ttl[r.key] = s2, d.TTL
		}
	}
	if !denied {
		for _, k := range changed {
			if ttl[k] <= 0 {
				delete(m.states, k)
			} else {
				m.states[k] = work[k]
			}
		}
	}
	return out
}

// runScript runs the batch script for reqs at nowMs (negative: Redis'
// TIME) and decodes the reply.
func runScript(ctx context.Context, c redis.Scripter, script *redis.Script, nowMs int64, reqs []luaReq) ([]algorithms.Decision, error) {
	return runScriptHeader(ctx, c, script, algorithms.BatchHeader{NowMs: nowMs, KeepMs: keepMs}, reqs)
}

func runScriptHeader(ctx context.Context, c redis.Scripter, script *redis.Script, h algorithms.BatchHeader, reqs []luaReq) ([]algorithms.Decision, error) {
	keys := make([]string, len(reqs))
	args := algorithms.BatchArgs(h, len(reqs))
	for i, r := range reqs {
		keys[i] = r.key
		args = algorithms.AppendBatchRequest(args, r.l, r.cost, r.dry)
		if r.group && i > 0 {
			args = algorithms.MarkBatchGroupStart(args)
		}
	}
	reply, err := script.Run(ctx, c, keys, args...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]algorithms.Decision, len(reqs))
	if err := algorithms.DecodeBatchReply(reply, out); err != nil {
		return nil, err
	}
	return out, nil
}

func luaSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(luaSeedEnv); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", luaSeedEnv, v, err)
		}
	}
	t.Logf("seed %d (replay with %s=%d)", seed, luaSeedEnv, seed)
	return seed
}

// diffLimits are the limits one algorithm's keys switch between: small
// ones that hit every branch often, odd ratios whose token scale is large,
// and one near the 2^50 bound, used alone on its own key.
// Keys switch periods too: the window algorithms' state holds the window's
// start in ms, so a state written under another period is recognised and
// counts as empty (it once held an index, which overflowed under another
// period).
func diffLimits(alg algorithms.Algorithm) (switching []algorithms.Limit, big algorithms.Limit) {
	ms := time.Millisecond
	switch alg {
	case algorithms.TokenBucket:
		switching = []algorithms.Limit{
			{Requests: 4, Period: time.Second, Burst: 6},
			{Requests: 5, Period: time.Second},
			{Requests: 7, Period: 3001 * ms, Burst: 20},
			{Requests: 1, Period: ms},
			{Requests: 3, Period: 10 * time.Second, Burst: 1},
			{Requests: 1000, Period: time.Second, Burst: 50},
			{Requests: 97, Period: 60 * time.Second},
		}
		big = algorithms.Limit{Requests: 999_983, Period: 2_097_143 * ms, Burst: 1 << 29}
	case algorithms.SlidingWindowLog:
		switching = []algorithms.Limit{
			{Requests: 5, Period: time.Second},
			{Requests: 3, Period: 250 * ms},
			{Requests: 40, Period: 7 * time.Second},
			{Requests: 1, Period: ms},
			{Requests: 200, Period: 60 * time.Second},
		}
		big = algorithms.Limit{Requests: algorithms.MaxLogRequests, Period: 1 << 30 * ms}
	case algorithms.FixedWindow:
		switching = []algorithms.Limit{
			{Requests: 5, Period: time.Second},
			{Requests: 3, Period: 250 * ms},
			{Requests: 40, Period: 7001 * ms},
			{Requests: 1, Period: ms},
			{Requests: 1000, Period: 60 * time.Second},
		}
		big = algorithms.Limit{Requests: 1 << 49, Period: 365 * 24 * time.Hour}
	default:
		switching = []algorithms.Limit{
			{Requests: 5, Period: time.Second},
			{Requests: 3, Period: 250 * ms},
			{Requests: 40, Period: 7001 * ms},
			{Requests: 1, Period: ms},
			{Requests: 1000, Period: 60 * time.Second},
		}
		big = algorithms.Limit{Requests: 1 << 20, Period: 1 << 30 * ms}
	}
	for i := range switching {
		switching[i].Algorithm = alg
	}
	big.Algorithm = alg
	return switching, big
}

// randCost draws a cost for capacity c: mostly small spends, with looks,
// refunds, costs above the capacity and absurd values.
func randCost(rng *rand.Rand, c int64) int64 {
	switch p := rng.IntN(100); {
	case p < 40:
		return 1
	case p < 60:
		return 1 + rng.Int64N(c)
	case p < 70:
		return 0
	case p < 82:
		return -1 - rng.Int64N(c+2)
	case p < 90:
		return c + 1 + rng.Int64N(3)
	case p < 93:
		return 1 << 62
	case p < 95:
		return -1 << 62
	default:
		return rng.Int64N(3) + 1
	}
}

// randStep draws how far the clock moves, for a period of w ms: mostly
// small steps, sometimes none, sometimes backwards, sometimes far ahead.
func randStep(rng *rand.Rand, w int64) int64 {
	switch p := rng.IntN(100); {
	case p < 40:
		return rng.Int64N(max(w/4, 1) + 1)
	case p < 55:
		return 0
	case p < 70:
		return 1 + rng.Int64N(3)
	case p < 80:
		return -1 - rng.Int64N(w)
	case p < 92:
		return w + rng.Int64N(2*w)
	default:
		return rng.Int64N(10 * w)
	}
}

// TestLuaMatchesGo is the differential test: seeded random traces run
// through algorithms.DecideMs (in luaModel) and through the batch script
// on a real redis-server with the same explicit now; every decision must
// be identical, field by field, and a key must exist in Redis exactly when
// the model holds state for it.
func TestLuaMatchesGo(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	script := redis.NewScript(algorithms.BatchScript())
	seed := luaSeed(t)
	const steps = 5000
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, uint64(alg)))
			switching, big := diffLimits(alg)
			for _, l := range append(switching, big) {
				if err := l.Validate(); err != nil {
					t.Fatalf("test limit %+v: %v", l, err)
				}
			}
			// Keys 0-2 switch limits now and then; key 3 keeps the big one.
			keys := make([]string, 4)
			limitOf := make([]algorithms.Limit, 4)
			for i := range keys {
				keys[i] = fmt.Sprintf("difftest:%s:%d", alg, i)
				limitOf[i] = switching[i%len(switching)]
			}
			limitOf[3] = big
			m := &luaModel{states: map[string]algorithms.State{}}
			now := int64(1_700_000_000_000) + rng.Int64N(1_000_000_000)
			batches, denials := 0, 0
			for step := range steps {
				now = max(0, now+randStep(rng, limitOf[rng.IntN(4)].PeriodMs()))
				n := 1
				if rng.IntN(10) < 3 {
					n = 2 + rng.IntN(4)
					batches++
				}
				reqs := make([]luaReq, n)
				for i := range reqs {
					k := rng.IntN(4)
					if k < 3 && rng.IntN(20) == 0 {
						limitOf[k] = switching[rng.IntN(len(switching))]
					}
					reqs[i] = luaReq{key: keys[k], l: limitOf[k], cost: randCost(rng, limitOf[k].Capacity()), dry: rng.IntN(10) == 0, group: i > 0 && rng.IntN(3) == 0}
				}
				want := m.decideGroups(now, reqs)
				if os.Getenv(luaTraceEnv) != "" {
					for i, r := range reqs {
						t.Logf("step %d now %d: %s %+v cost %d dry %v -> %+v", step, now, r.key, r.l, r.cost, r.dry, want[i])
					}
				}
				got, err := runScript(ctx, c, script, now, reqs)
				if err != nil {
					t.Fatalf("step %d (now %d): script: %v", step, now, err)
				}
				for i := range reqs {
					if !want[i].Allowed && reqs[i].cost > 0 {
						denials++
					}
					if got[i] != want[i] {
						t.Fatalf("step %d (now %d), request %d of %d: key %s, limit %+v, cost %d, dry %v:\n got (lua) %+v\nwant (go)  %+v",
							step, now, i, n, reqs[i].key, reqs[i].l, reqs[i].cost, reqs[i].dry, got[i], want[i])
					}
				}
				exists := c.Pipeline()
				cmds := make([]*redis.IntCmd, len(keys))
				for i, k := range keys {
					cmds[i] = exists.Exists(ctx, k)
				}
				if _, err := exists.Exec(ctx); err != nil {
					t.Fatalf("EXISTS: %v", err)
				}
				for i, k := range keys {
					st, held := m.states[k]
					if (cmds[i].Val() == 1) != held {
						t.Fatalf("step %d (now %d): key %s exists in Redis: %v, model holds state: %v (%+v)", step, now, k, cmds[i].Val() == 1, held, m.states[k])
					}
					// The log's ring is the same in Redis as in Go, slot
					// for slot, head and floor included.
					if held && alg == algorithms.SlidingWindowLog {
						if got := redisLogState(t, c, k); !reflect.DeepEqual(got, st) {
							t.Fatalf("step %d (now %d): key %s: ring in Redis\n%+v\nin Go\n%+v", step, now, k, got, st)
						}
					}
				}
			}
			if denials < steps/20 || batches < steps/5 {
				t.Fatalf("trace too tame: %d denials and %d batches in %d steps", denials, batches, steps)
			}
			t.Logf("%d steps, %d multi-request batches, %d denials", steps, batches, denials)
		})
	}
}

// TestLuaServerTime: with no explicit now the script decides at Redis'
// TIME, read as sec*1000 + usec/1000.
func TestLuaServerTime(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	script := redis.NewScript(algorithms.BatchScript())
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: time.Hour}
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runScript(ctx, c, script, -1, []luaReq{{key: "servertime", l: l, cost: 1}}); err != nil {
		t.Fatal(err)
	}
	after, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	at := logUnitTimes(t, c, "servertime")
	if len(at) != 1 {
		t.Fatalf("log = %v; want one unit", at)
	}
	if at[0] < before.UnixMilli() || at[0] > after.UnixMilli() {
		t.Fatalf("unit at %d ms, want within Redis TIME [%d, %d]", at[0], before.UnixMilli(), after.UnixMilli())
	}
}

// logUnitTimes decodes the sliding window log at key and returns the
// times of its live units (above the floor), oldest first.
func logUnitTimes(t *testing.T, c *redis.Client, key string) []int64 {
	t.Helper()
	s := redisLogState(t, c, key)
	var out []int64
	n := int64(len(s.Log))
	for i := range n {
		if v := s.Log[(s.A+i)%n]; v != algorithms.EmptySlot && v > s.B {
			out = append(out, v)
		}
	}
	return out
}

// redisLogState decodes the sliding window log string at key (see
// lua/sliding_window_log.lua) into the State the Go code would hold: A the
// head, B the floor, Log the slots (EmptySlot for an empty one).
func redisLogState(t *testing.T, c *redis.Client, key string) algorithms.State {
	t.Helper()
	const epochMs, hdr, width = 1767225600000, 19, 6
	v, err := c.Get(context.Background(), key).Bytes()
	if err != nil || len(v) < hdr+width || (len(v)-hdr)%width != 0 || v[0] != 1 {
		t.Fatalf("log at %s: %q, %v; want a header and whole slots", key, v, err)
	}
	le := func(b []byte) int64 { // 6 bytes signed or 4 unsigned, little-endian
		var x uint64
		for i := len(b) - 1; i >= 0; i-- {
			x = x<<8 | uint64(b[i])
		}
		if len(b) == 6 {
			return int64(x<<16) >> 16
		}
		return int64(x)
	}
	n := (len(v) - hdr) / width
	if le(v[1:5]) != int64(n) {
		t.Fatalf("log at %s: header says %d slots, the string holds %d", key, le(v[1:5]), n)
	}
	s := algorithms.State{A: le(v[5:9]), C: le(v[9:13]), B: le(v[13:19]) + epochMs, Log: make([]int64, n)}
	for i := range s.Log {
		rel := le(v[hdr+i*width : hdr+(i+1)*width])
		s.Log[i] = rel + epochMs
		if rel == -1<<47 {
			s.Log[i] = algorithms.EmptySlot
		}
	}
	return s
}

// TestLuaDenyWritesNothing: a batch with one denied request leaves every
// key of the batch byte for byte as it was, TTL included.
func TestLuaDenyWritesNothing(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	script := redis.NewScript(algorithms.BatchScript())
	now := int64(1_700_000_000_000)
	var reqs []luaReq
	for _, alg := range algorithms.Algorithms {
		l := algorithms.Limit{Algorithm: alg, Requests: 5, Period: time.Minute}
		reqs = append(reqs, luaReq{key: "deny:" + alg.String(), l: l, cost: 2})
	}
	if _, err := runScript(ctx, c, script, now, reqs); err != nil {
		t.Fatal(err)
	}
	dump := func() []string {
		var s []string
		for _, r := range reqs {
			d, err := c.Dump(ctx, r.key).Result()
			if err != nil {
				t.Fatalf("DUMP %s: %v", r.key, err)
			}
			s = append(s, d)
		}
		return s
	}
	pttl := func() []time.Duration {
		var s []time.Duration
		for _, r := range reqs {
			ttl, err := c.PTTL(ctx, r.key).Result()
			if err != nil || ttl <= 0 {
				t.Fatalf("PTTL %s = %v, %v; want a TTL", r.key, ttl, err)
			}
			s = append(s, ttl)
		}
		return s
	}
	before, ttlBefore := dump(), pttl()
	// The same spends again, then one that cannot fit: all denied together.
	deny := append(append([]luaReq(nil), reqs...), luaReq{key: reqs[0].key, l: reqs[0].l, cost: 5})
	got, err := runScript(ctx, c, script, now+1000, deny)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range got[:len(reqs)] {
		if !d.Allowed {
			t.Fatalf("request %d: %+v, want allowed (it fits on its own)", i, d)
		}
	}
	if last := got[len(got)-1]; last.Allowed {
		t.Fatalf("last request: %+v, want denied", last)
	}
	if after := dump(); strings.Join(after, "|") != strings.Join(before, "|") {
		t.Fatalf("a denied batch changed state:\nbefore %q\nafter  %q", before, after)
	}
	for i, ttl := range pttl() {
		if ttl > ttlBefore[i] {
			t.Fatalf("a denied batch extended the TTL of %s from %v to %v", reqs[i].key, ttlBefore[i], ttl)
		}
	}

	// A probe of a batch that fits decides exactly as the real call will,
	// and writes nothing.
	probe, err := runScriptHeader(ctx, c, script, algorithms.BatchHeader{NowMs: now + 2000, KeepMs: keepMs, Probe: true}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if after := dump(); strings.Join(after, "|") != strings.Join(before, "|") {
		t.Fatalf("a probe changed state:\nbefore %q\nafter  %q", before, after)
	}
	real, err := runScript(ctx, c, script, now+2000, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		if !real[i].Allowed || probe[i] != real[i] {
			t.Fatalf("request %d: probe %+v, real call %+v; want both allowed and equal", i, probe[i], real[i])
		}
	}
	if after := dump(); strings.Join(after, "|") == strings.Join(before, "|") {
		t.Fatal("the real call after the probe wrote nothing")
	}
}

// TestLuaErrors: malformed calls are refused with an error reply, before
// anything is written.
func TestLuaErrors(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	script := redis.NewScript(algorithms.BatchScript())
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Second}
	tests := []struct {
		name string
		keys []string
		args []any
		want string
	}{
		{"too few args", []string{"e:a"}, []any{1, 0, 1, 4, 5, 1000}, "want 3 + 6 ARGV per key"},
		{"bad algorithm", []string{"e:a"}, []any{1, 0, 1, 9, 5, 1000, 0, 1, 0}, "bad arguments for request 1"},
		{"zero period", []string{"e:a"}, []any{1, 0, 1, 4, 5, 0, 0, 1, 0}, "bad arguments for request 1"},
		{"fractional cost", []string{"e:a"}, []any{1, 0, 1, 4, 5, 1000, 0, "1.5", 0}, "bad arguments for request 1"},
		{"bad keep", []string{"e:a"}, []any{1, "x", 1, 4, 5, 1000, 0, 1, 0}, "bad keep_ms"},
		{"bad write flag", []string{"e:a"}, []any{1, 0, 2, 4, 5, 1000, 0, 1, 0}, "bad write flag"},
		{"two algorithms on one key", []string{"e:b", "e:b"}, []any{1, 0, 1, 4, 5, 1000, 0, 1, 0, 2, 5, 1000, 0, 1, 0}, "used with two algorithms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := script.Run(ctx, c, tc.keys, tc.args...).Err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if n, _ := c.Exists(ctx, tc.keys...).Result(); n != 0 {
				t.Fatalf("a refused call wrote %d keys", n)
			}
		})
	}
	// A key holding something else is refused, not misread.
	if err := c.Set(ctx, "e:corrupt", "\xff", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := runScript(ctx, c, script, 1, []luaReq{{key: "e:corrupt", l: l, cost: 1}})
	if err == nil || !strings.Contains(err.Error(), "malformed state") {
		t.Fatalf("corrupt state: %v, want malformed state", err)
	}
	// So is a sliding window log whose header does not describe a ring.
	swl := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Period: time.Second}
	for _, v := range []string{"\xff", strings.Repeat("\x00", 19), "\x02" + strings.Repeat("\x00", 24)} {
		if err := c.Set(ctx, "e:corrupt", v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := runScript(ctx, c, script, 1, []luaReq{{key: "e:corrupt", l: swl, cost: 1}})
		if err == nil || !strings.Contains(err.Error(), "malformed state") {
			t.Fatalf("corrupt log %q: %v, want malformed state", v, err)
		}
	}
}

func TestDecodeBatchReply(t *testing.T) {
	ok := []any{int64(1), int64(5), int64(4), int64(0), int64(1000), int64(1000), int64(0), int64(5), int64(0), int64(-1), int64(0), int64(0)}
	out := make([]algorithms.Decision, 2)
	if err := algorithms.DecodeBatchReply(ok, out); err != nil {
		t.Fatal(err)
	}
	want := []algorithms.Decision{
		{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: time.Second, TTL: time.Second},
		{Allowed: false, Limit: 5, RetryAfter: algorithms.Never},
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("decision %d: got %+v, want %+v", i, out[i], want[i])
		}
	}
	bad := map[string]any{
		"not an array":  "OK",
		"nil":           nil,
		"short":         ok[:11],
		"long":          append(append([]any(nil), ok...), int64(1)),
		"string field":  append([]any{"1"}, ok[1:]...),
		"allowed 2":     append([]any{int64(2)}, ok[1:]...),
		"retry -2":      append(append([]any(nil), ok[:9]...), int64(-2), int64(0), int64(0)),
		"negative ttl":  append(append([]any(nil), ok[:11]...), int64(-5)),
		"zero limit":    append([]any{int64(1), int64(0)}, ok[2:]...),
		"float field":   append([]any{float64(1)}, ok[1:]...),
		"nested arrays": []any{ok[:6], ok[6:]},
	}
	for name, reply := range bad {
		if err := algorithms.DecodeBatchReply(reply, out); !errors.Is(err, algorithms.ErrBatchReply) {
			t.Errorf("%s: error %v, want ErrBatchReply", name, err)
		}
	}
}
