package redisstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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
// failure: FLOODGATE_LUA_SEED=1234 go test -run TestLuaMatchesGo ./store/redisstore/
const luaSeedEnv = "FLOODGATE_LUA_SEED"

// luaTraceEnv, when set, logs every request of the differential trace with
// the model's decision.
const luaTraceEnv = "FLOODGATE_LUA_TRACE"

// keepMs keeps every key an hour longer than its TTL: the test's clock is
// simulated, so Redis must not expire a key that the simulated time still
// needs. State past its TTL decides like no state, so keeping it longer
// never changes a decision.
const keepMs = int64(time.Hour / time.Millisecond)

// emptySlot is the value of an empty slot in the Go log's ring (below
// every time): the decoded Lua ring is compared with the Go one, so a
// change of either shows.
const emptySlot int64 = math.MinInt64

// luaReq is one request of a batch: a key, a limit and a cost.
type luaReq struct {
	key  string
	l    algorithms.Limit
	cost int64
	dry  bool
	// mode is algorithms.Debt for a settle's charge (flags bit 1), or
	// algorithms.NoWait (bit 2).
	mode algorithms.Mode
	// group starts a new group: an independent all-or-nothing Decide
	// call sharing the script call (ignored on the first request).
	group bool
}

// luaModel is the Go reference for the scripts: the store.Store
// contract built from algorithms.DecideAt. states holds what Redis should
// hold; a key is absent when it was never written or its TTL was 0.
type luaModel struct {
	states map[string]algorithms.State
	// calMs is floodgate's clock (header.calMs): calendar limits decide
	// on the boundaries around it, at the script's now.
	calMs int64
	// debts counts the debt charges that left a key owing.
	debts int
	// settled tallies the settlements (settleStep).
	settled settleCounts
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

// modelKey is where the model keeps the state of key (limit l) for a
// decision at nowMs, b the bounds of a calendar limit: the key itself,
// or a fixed window's window key (windowKey), the counter
// lua/fixed_window.lua uses.
func modelKey(key string, l algorithms.Limit, nowMs int64, b algorithms.Bounds) string {
	if !windowKeyed(l.Algorithm) {
		return key
	}
	if w := l.Period.Milliseconds(); l.Calendar == algorithms.NoCalendar {
		return windowKey(key, nowMs-nowMs%w+w)
	}
	if nowMs >= b[2] {
		return windowKey(key, b[3])
	}
	return windowKey(key, b[2])
}

// put records s2, the state after a write with TTL ttl, at mk: a fixed
// window's count only while positive (its key holds nothing else), any
// other state while its TTL lasts.
func (m *luaModel) put(mk string, l algorithms.Limit, s2 algorithms.State, ttl time.Duration) {
	if ttl <= 0 || (windowKeyed(l.Algorithm) && s2.B <= 0) {
		delete(m.states, mk)
	} else {
		m.states[mk] = s2
	}
}

// decide runs one all-or-nothing batch at nowMs.
func (m *luaModel) decide(nowMs int64, reqs []luaReq) []algorithms.Decision {
	work := map[string]algorithms.State{}
	ttl := map[string]time.Duration{}
	limit := map[string]algorithms.Limit{}
	var changed []string
	out := make([]algorithms.Decision, len(reqs))
	denied := false
	for i, r := range reqs {
		var b algorithms.Bounds
		if r.l.Calendar != algorithms.NoCalendar {
			b = r.l.Calendar.Bounds(r.l.Location, m.calMs)
		}
		mk := modelKey(r.key, r.l, nowMs, b)
		s, ok := work[mk]
		if !ok {
			s = m.states[mk]
			work[mk] = s
		}
		s2, d := algorithms.DecideAt(r.l, s, algorithms.Request{NowMs: nowMs, Cost: r.cost, Mode: r.mode})
		if r.l.Calendar != algorithms.NoCalendar {
			s2, d = algorithms.DecideAt(r.l, s, algorithms.Request{NowMs: nowMs, Cost: r.cost, Mode: r.mode, Bounds: r.l.Calendar.Bounds(r.l.Location, m.calMs)})
		}
		if d.Debt > 0 {
			m.debts++
		}
		d.Debt, d.Unrecorded = 0, 0 // Decide does not report them (store.Request.Mode)
		out[i] = d
		if r.cost > 0 && !d.Allowed {
			denied = true
		}
		if !r.dry && d.Allowed && r.cost != 0 {
			if _, seen := ttl[mk]; !seen {
				changed = append(changed, mk)
			}
			work[mk], ttl[mk], limit[mk] = s2, d.TTL, r.l
			if windowKeyed(r.l.Algorithm) && s2.B <= 0 {
				work[mk] = algorithms.State{} // an emptied window's key is gone
			}
		}
	}
	if !denied {
		for _, k := range changed {
			m.put(k, limit[k], work[k], ttl[k])
		}
	}
	return out
}

// runScript runs the decide function for reqs at nowMs (negative: Redis'
// TIME) and decodes the reply.
func runScript(ctx context.Context, c redis.Cmdable, nowMs int64, reqs []luaReq) ([]algorithms.Decision, error) {
	return runScriptHeader(ctx, c, header{nowMs: nowMs, keepMs: keepMs}, reqs)
}

// scriptArgs builds the KEYS and ARGV of a call holding reqs: the header
// and the first group in ARGV[1], one more ARGV per group.
func scriptArgs(h header, reqs []luaReq) ([]string, []any) {
	keys := make([]string, len(reqs))
	buf := appendHeader(nil, h)
	var args []any
	for i, r := range reqs {
		keys[i] = r.key
		if r.group && i > 0 {
			args = append(args, buf)
			buf = nil
		}
		buf = appendRequest(buf, r.l, r.cost, r.dry, r.mode, h)
	}
	return keys, append(args, buf)
}

func runScriptHeader(ctx context.Context, c redis.Cmdable, h header, reqs []luaReq) ([]algorithms.Decision, error) {
	keys, args := scriptArgs(h, reqs)
	reply, err := decideLua.Run(ctx, c, keys, args...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]algorithms.Decision, len(reqs))
	if err := decodeReply(reply, out, func(i int) int64 { return reqs[i].l.Capacity() }); err != nil {
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
		switching = append(switching, calendarLimits()...)
		big = algorithms.Limit{Requests: 1 << 49, Period: 365 * 24 * time.Hour}
	case algorithms.LeakyBucket:
		// Odd rates (a slot of 3001/7 ms), queues of 1 (pure spacing) and
		// long ones, and a big one whose units fill the 2^50 bound.
		switching = []algorithms.Limit{
			{Requests: 4, Period: time.Second, Burst: 6},
			{Requests: 3, Period: time.Second},
			{Requests: 7, Period: 3001 * ms, Burst: 20},
			{Requests: 1, Period: ms},
			{Requests: 3, Period: 10 * time.Second, Burst: 1},
			{Requests: 1000, Period: time.Second, Burst: 50},
			{Requests: 97, Period: 60 * time.Second},
		}
		big = algorithms.Limit{Requests: 999_983, Period: 2_097_143 * ms, Burst: 1 << 29}
	default:
		switching = []algorithms.Limit{
			{Requests: 5, Period: time.Second},
			{Requests: 3, Period: 250 * ms},
			{Requests: 40, Period: 7001 * ms},
			{Requests: 1, Period: ms},
			{Requests: 1000, Period: 60 * time.Second},
		}
		switching = append(switching, calendarLimits()...)
		big = algorithms.Limit{Requests: 1 << 20, Period: 1 << 30 * ms}
	}
	for i := range switching {
		switching[i].Algorithm = alg
	}
	big.Algorithm = alg
	return switching, big
}

// calendarLimits are the window algorithms' calendar limits of the
// differential test: days of 23 and 25 hours (Berlin, New York), ISO
// weeks, months in Jakarta, years.
func calendarLimits() []algorithms.Limit {
	zone := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			panic(err)
		}
		return loc
	}
	return []algorithms.Limit{
		{Requests: 5, Calendar: algorithms.Day, Location: zone("Europe/Berlin")},
		{Requests: 3, Calendar: algorithms.Day, Location: zone("America/New_York")},
		{Requests: 40, Calendar: algorithms.Week},
		{Requests: 7, Calendar: algorithms.Month, Location: zone("Asia/Jakarta")},
		{Requests: 1000, Calendar: algorithms.Year, Location: zone("Europe/Berlin")},
	}
}

// stepMs is the scale of the differential test's clock steps for l: its
// period, or 6 hours for a calendar limit (a day in four steps).
func stepMs(l algorithms.Limit) int64 {
	if l.Calendar != algorithms.NoCalendar {
		return 6 * 3_600_000
	}
	return l.Period.Milliseconds()
}

// randSkew draws how far floodgate's clock (header.calMs) is ahead of
// Redis': mostly not at all, sometimes a few ms either way (a Redis just
// past a boundary floodgate's clock has not reached), sometimes more than
// a whole period either way (out of range, decided safely).
func randSkew(rng *rand.Rand) int64 {
	switch p := rng.IntN(100); {
	case p < 70:
		return 0
	case p < 85:
		return -rng.Int64N(5000)
	case p < 95:
		return rng.Int64N(5000)
	default:
		return (rng.Int64N(5) - 2) * 40 * 86_400_000
	}
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
// through algorithms.DecideAt (in luaModel) and through the scripts on a
// real redis-server with the same explicit now; every decision must be
// identical, field by field, a key must exist in Redis exactly when the
// model holds state for it, and the state in Redis must be the model's,
// field by field (the log's ring slot for slot).
//
// Each algorithm runs a trace of its own, and "mixed" gives each key its
// own algorithm, so that groups mix algorithms.
func TestLuaMatchesGo(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	seed := luaSeed(t)
	type trace struct {
		name string
		algs [4]algorithms.Algorithm
		big  bool // key 3 keeps its algorithm's big limit
		near bool // its clock starts within a week of Redis' (else in 2023)
	}
	var traces []trace
	for _, alg := range algorithms.All() {
		traces = append(traces, trace{alg.String(), [4]algorithms.Algorithm{alg, alg, alg, alg}, true, false})
	}
	tb, sw, swl, fw, lb := algorithms.TokenBucket, algorithms.SlidingWindow, algorithms.SlidingWindowLog, algorithms.FixedWindow, algorithms.LeakyBucket
	traces = append(traces, trace{"mixed", [4]algorithms.Algorithm{tb, sw, swl, fw}, false, false})
	traces = append(traces, trace{"mixed/leaky", [4]algorithms.Algorithm{lb, tb, swl, lb}, false, false})
	// Near Redis' clock the counters' states record their keys' expiry
	// (the codec's second form) and writes keep TTLs.
	traces = append(traces, trace{"mixed/near", [4]algorithms.Algorithm{sw, lb, lb, sw}, false, true})
	for ti, tr := range traces {
		stream := uint64(ti) // keys of their own: they hold a random number
		start := int64(1_700_000_000_000)
		if tr.near {
			start = time.Now().UnixMilli() - 500_000_000
		}
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel() // each trace its own keys and model
			diffTrace(t, c, rand.New(rand.NewPCG(seed, stream)), tr.algs, tr.big, start)
		})
	}
}

// diffTrace runs one differential trace on 4 keys of algorithms algs,
// its clock starting up to 10^9 ms after start.
func diffTrace(t *testing.T, c *redis.Client, rng *rand.Rand, algs [4]algorithms.Algorithm, big bool, start int64) {
	steps := 5000
	if raceOn {
		steps = 2000 // each step is a round trip, about five times slower under the race detector
	}
	ctx := context.Background()
	// Keys 0-2 (and 3 unless big) switch limits now and then; key 3 keeps
	// the big one if big.
	keys := make([]string, 4)
	switching := make([][]algorithms.Limit, 4)
	limitOf := make([]algorithms.Limit, 4)
	for i := range keys {
		keys[i] = fmt.Sprintf("difftest:%d:%s:%d", rng.Uint32(), algs[i], i)
		sw, bigL := diffLimits(algs[i])
		for _, l := range append(sw, bigL) {
			if err := l.Validate(); err != nil {
				t.Fatalf("test limit %+v: %v", l, err)
			}
		}
		switching[i] = sw
		limitOf[i] = sw[i%len(sw)]
		if i == 3 && big {
			limitOf[i] = bigL
		}
	}
	m := &luaModel{states: map[string]algorithms.State{}}
	now := start + rng.Int64N(1_000_000_000)
	batches, denials := 0, 0
	for step := range steps {
		now = max(0, now+randStep(rng, stepMs(limitOf[rng.IntN(4)])))
		m.calMs = now + randSkew(rng)
		if rng.IntN(10) == 0 { // a settlement (settle.lua): Debt and Unrecorded compared
			k := rng.IntN(4)
			settleStep(t, c, m, rng, step, now, keys[k], limitOf[k])
			continue
		}
		n := 1
		if rng.IntN(10) < 3 {
			n = 2 + rng.IntN(4)
			batches++
		}
		reqs := make([]luaReq, n)
		for i := range reqs {
			k := rng.IntN(4)
			if (k < 3 || !big) && rng.IntN(20) == 0 {
				limitOf[k] = switching[k][rng.IntN(len(switching[k]))]
			}
			reqs[i] = luaReq{key: keys[k], l: limitOf[k], cost: randCost(rng, limitOf[k].Capacity()), dry: rng.IntN(10) == 0, group: i > 0 && rng.IntN(3) == 0}
			switch rng.IntN(10) {
			case 0, 1:
				reqs[i].mode = algorithms.NoWait // only the leaky bucket heeds it
			case 2: // a settle's charge: debt, often beyond the capacity
				reqs[i].mode, reqs[i].cost = algorithms.Debt, rng.Int64N(3*limitOf[k].Capacity()+2)
			}
		}
		want := m.decideGroups(now, reqs)
		if os.Getenv(luaTraceEnv) != "" {
			for i, r := range reqs {
				t.Logf("step %d now %d: %s %+v cost %d dry %v mode %d group %v -> %+v", step, now, r.key, r.l, r.cost, r.dry, r.mode, r.group, want[i])
			}
		}
		got, err := runScriptHeader(ctx, c, header{nowMs: now, keepMs: keepMs, calMs: m.calMs}, reqs)
		if err != nil {
			t.Fatalf("step %d (now %d): script: %v", step, now, err)
		}
		for i := range reqs {
			if !want[i].Allowed && reqs[i].cost > 0 {
				denials++
			}
			if got[i] != want[i] {
				t.Fatalf("step %d (now %d), request %d of %d: key %s, limit %+v, cost %d, dry %v, mode %d:\n got (lua) %+v\nwant (go)  %+v",
					step, now, i, n, reqs[i].key, reqs[i].l, reqs[i].cost, reqs[i].dry, reqs[i].mode, got[i], want[i])
			}
		}
		for i, k := range keys {
			if windowKeyed(algs[i]) {
				var touched []string
				for _, r := range reqs {
					var b algorithms.Bounds
					if r.l.Calendar != algorithms.NoCalendar {
						b = r.l.Calendar.Bounds(r.l.Location, m.calMs)
					}
					touched = append(touched, modelKey(r.key, r.l, now, b))
				}
				checkWindows(t, c, m, step, now, k, touched)
				continue
			}
			st, held := m.states[k]
			v, err := c.Get(ctx, k).Result()
			if err != nil && err != redis.Nil {
				t.Fatalf("GET %s: %v", k, err)
			}
			if (err == nil) != held {
				t.Fatalf("step %d (now %d): key %s exists in Redis: %v, model holds state: %v (%+v)", step, now, k, err == nil, held, m.states[k])
			}
			if !held {
				continue
			}
			// The state is the same in Redis as in Go, field by field; the
			// log's ring slot for slot, head and floor included.
			var inRedis algorithms.State
			switch algs[i] {
			case algorithms.SlidingWindowLog:
				inRedis = redisLogState(t, c, k)
			case algorithms.TokenBucket:
				inRedis = decodeArrival(t, v)
			default:
				inRedis = decodeCounterState(t, algs[i], v)
			}
			if !reflect.DeepEqual(inRedis, st) {
				t.Fatalf("step %d (now %d): key %s: state in Redis\n%+v\nin Go\n%+v", step, now, k, inRedis, st)
			}
		}
	}
	checkSettles(t, m, algs)
	if denials < steps/20 || batches < steps/5 || (algs[0] != algorithms.SlidingWindowLog && m.debts < steps/100) {
		t.Fatalf("trace too tame: %d denials, %d batches and %d debts in %d steps", denials, batches, m.debts, steps)
	}
	t.Logf("%d steps, %d multi-request batches, %d denials", steps, batches, denials)
}

// checkWindows compares a fixed window's counters in Redis (its window
// keys) with the model's: each window of base among touched (the
// windows this step's requests counted in, the only ones a step changes)
// is in Redis exactly when the model holds it, with the model's count.
func checkWindows(t *testing.T, c *redis.Client, m *luaModel, step int, now int64, base string, touched []string) {
	t.Helper()
	ctx := context.Background()
	check := func(wk string) {
		st, held := m.states[wk]
		v, err := c.Get(ctx, wk).Int64()
		if err == redis.Nil && !held {
			return
		}
		if !held || err != nil || v != st.B {
			t.Fatalf("step %d (now %d): window %s holds %d (%v), the model %+v (held %v)", step, now, wk, v, err, st, held)
		}
	}
	for _, wk := range touched {
		if strings.HasPrefix(wk, base+"#") {
			check(wk)
		}
	}
}

// decodeArrival decodes a token bucket's state (lua/token_bucket.lua)
// into the State the Go code holds: the arrival time's ms and ticks.
func decodeArrival(t *testing.T, v string) algorithms.State {
	t.Helper()
	const epochMs = 1767225600000
	le := func(b string, signed bool) int64 {
		var x uint64
		for i := len(b) - 1; i >= 0; i-- {
			x = x<<8 | uint64(b[i])
		}
		if !signed {
			return int64(x)
		}
		shift := 64 - 8*len(b)
		return int64(x<<shift) >> shift
	}
	switch len(v) {
	case 8:
		return algorithms.State{A: le(v[:5], true) + epochMs, B: le(v[5:], false)}
	case 16:
		return algorithms.State{A: le(v[:8], true) + epochMs, B: le(v[8:], true)}
	}
	t.Fatalf("token bucket state %q: %d bytes, want 8 or 16", v, len(v))
	return algorithms.State{}
}

// decodeCounterState decodes a three-integer state (lua/lib.lua's codec,
// either form) into the State the Go code holds, times made absolute.
func decodeCounterState(t *testing.T, alg algorithms.Algorithm, v string) algorithms.State {
	t.Helper()
	const epochMs = 1767225600000
	if len(v) < 1 {
		t.Fatalf("empty counter state")
	}
	h, body, le := int(v[0]), v[1:], 0
	if h >= 64 && h < 128 && len(v) >= 2 {
		h, body, le = h-64, v[2:], int(v[1])
	}
	la, lc := h>>3, h&7
	lb := len(body) - la - lc - le
	if la > 7 || le > 7 || lb < 0 || lb > 8 {
		t.Fatalf("counter state %q: bad lengths", v)
	}
	s := algorithms.State{A: leInt(body[:la]), C: leInt(body[la : la+lc]), B: leInt(body[la+lc+le:])}
	if alg == algorithms.LeakyBucket {
		s.B += epochMs
	} else {
		s.A += epochMs
	}
	return s
}

// TestLuaServerTime: with no explicit now the script decides at Redis'
// TIME, read as sec*1000 + usec/1000.
func TestLuaServerTime(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: time.Hour}
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runScript(ctx, c, -1, []luaReq{{key: "servertime", l: l, cost: 1}}); err != nil {
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
		if v := s.Log[(s.A+i)%n]; v != emptySlot && v > s.B {
			out = append(out, v)
		}
	}
	return out
}

// redisLogState decodes the sliding window log string at key (see
// lua/sliding_window_log.lua) into the State the Go code would hold: A the
// head, B the floor, Log the slots (emptySlot for an empty one).
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
			s.Log[i] = emptySlot
		}
	}
	return s
}

// TestLuaDenyWritesNothing: a batch with one denied request leaves every
// key of the batch byte for byte as it was (its TTL may be the undone
// write's, never shorter: a state past its time decides as none).
func TestLuaDenyWritesNothing(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	now := int64(1_700_000_000_000)
	var reqs []luaReq
	for _, alg := range algorithms.All() {
		l := algorithms.Limit{Algorithm: alg, Requests: 5, Period: time.Minute}
		reqs = append(reqs, luaReq{key: "deny:" + alg.String(), l: l, cost: 2})
	}
	if _, err := runScript(ctx, c, now, reqs); err != nil {
		t.Fatal(err)
	}
	// A fixed window's count is in its window's key (all of the test's
	// times are in one minute).
	rk := func(r luaReq) string { return modelKey(r.key, r.l, now, algorithms.Bounds{}) }
	dump := func() []string {
		var s []string
		for _, r := range reqs {
			d, err := c.Dump(ctx, rk(r)).Result()
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
			ttl, err := c.PTTL(ctx, rk(r)).Result()
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
	got, err := runScript(ctx, c, now+1000, deny)
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
		if ttl < ttlBefore[i]-time.Second {
			t.Fatalf("a denied batch shortened the TTL of %s from %v to %v", reqs[i].key, ttlBefore[i], ttl)
		}
	}

	// A probe of a batch that fits decides exactly as the real call will,
	// and writes nothing.
	probe, err := runScriptHeader(ctx, c, header{nowMs: now + 2000, keepMs: keepMs, probe: true}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if after := dump(); strings.Join(after, "|") != strings.Join(before, "|") {
		t.Fatalf("a probe changed state:\nbefore %q\nafter  %q", before, after)
	}
	real, err := runScript(ctx, c, now+2000, reqs)
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

// TestLuaErrors: malformed calls are refused with an error reply; a call
// refused in its first group writes nothing.
func TestLuaErrors(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Second}
	h := header{nowMs: 1, calMs: 1_700_000_000_000}
	hdr := appendHeader(nil, h)
	req := func(l algorithms.Limit, cost int64, edit func(b []byte)) []byte {
		b := appendRequest(nil, l, cost, false, 0, h)
		if edit != nil {
			edit(b)
		}
		return b
	}
	join := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	zeroPeriod := l
	zeroPeriod.Period = 0
	zeroRequests := l
	zeroRequests.Requests = 0
	swl := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Period: time.Second}
	cal := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Calendar: algorithms.Day}
	swapBounds := func(b []byte) { // b1 before b0
		copy(b[reqLen:reqLen+8], b[reqLen+8:reqLen+16])
	}
	tests := []struct {
		name string
		keys []string
		args []any
		want string
	}{
		{"no ARGV", []string{"e:a"}, nil, "bad header"},
		{"short header", []string{"e:a"}, []any{hdr[:10]}, "bad header"},
		{"bad form", []string{"e:a"}, []any{join([]byte("x"), hdr[1:], req(l, 1, nil))}, "bad header"},
		{"bad write flag", []string{"e:a"}, []any{join(hdr[:hdrLen-1], []byte{2}, req(l, 1, nil))}, "bad header"},
		{"negative keep", []string{"e:a"}, []any{join(hdr[:9], bytes.Repeat([]byte{0xff}, 8), hdr[17:], req(l, 1, nil))}, "bad header"},
		{"short request", []string{"e:a"}, []any{join(hdr, req(l, 1, nil)[:20])}, "short request"},
		{"empty group", []string{"e:a"}, []any{join(hdr, req(l, 1, nil)), ""}, "an empty group"},
		{"more requests than keys", []string{"e:a"}, []any{join(hdr, req(l, 1, nil), req(l, 1, nil))}, "2 requests for 1 keys"},
		{"fewer requests than keys", []string{"e:a", "e:b"}, []any{join(hdr, req(l, 1, nil))}, "1 requests for 2 keys"},
		{"bad algorithm", []string{"e:a"}, []any{join(hdr, req(l, 1, func(b []byte) { b[0] = byte(len(algorithms.All()) + 1) }))}, "bad arguments for request 1"},
		{"no algorithm", []string{"e:a"}, []any{join(hdr, req(l, 1, func(b []byte) { b[0] = 0 }))}, "bad arguments for request 1"},
		{"bad flags", []string{"e:a"}, []any{join(hdr, req(l, 1, func(b []byte) { b[0] |= 0x80 }))}, "bad arguments for request 1"}, // flag bit 4: no feature
		{"negative burst", []string{"e:a"}, []any{join(hdr, req(l, 1, func(b []byte) { b[17+7] = 0xff }))}, "bad arguments for request 1"},
		{"zero period", []string{"e:a"}, []any{join(hdr, req(zeroPeriod, 1, nil))}, "bad arguments for request 1"},
		{"zero requests", []string{"e:a"}, []any{join(hdr, req(zeroRequests, 1, nil))}, "bad arguments for request 1"},
		{"second request bad", []string{"e:a", "e:b"}, []any{join(hdr, req(l, 1, nil), req(zeroPeriod, 1, nil))}, "bad arguments for request 2"},
		{"calendar flag without bounds", []string{"e:a"}, []any{join(hdr, req(l, 1, func(b []byte) { b[0] |= 64 }))}, "short calendar request"},
		{"calendar bounds cut short", []string{"e:a"}, []any{join(hdr, req(cal, 1, nil)[:reqLen+20])}, "short calendar request"},
		{"calendar bounds out of order", []string{"e:a"}, []any{join(hdr, req(cal, 1, swapBounds))}, "bad arguments for request 1"},
		{"calendar period ending before it starts", []string{"e:a"}, []any{join(hdr, req(cal, 1, func(b []byte) { copy(b[reqLen+16:reqLen+24], b[reqLen+8:reqLen+16]) }))}, "bad arguments for request 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.Del(ctx, tc.keys...)
			err := decideLua.Run(ctx, c, tc.keys, tc.args...).Err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if n, _ := c.Exists(ctx, tc.keys...).Result(); n != 0 && tc.name != "fewer requests than keys" && tc.name != "empty group" {
				t.Fatalf("a refused call wrote %d keys", n)
			}
		})
	}
	// A key holding something else is refused, not misread, alone or in
	// a batch (a fixed window's: its window's key, at now 1 ms).
	if err := c.Set(ctx, windowKey("e:corrupt", l.Period.Milliseconds()), "\xff", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, reqs := range [][]luaReq{
		{{key: "e:corrupt", l: l, cost: 1}},
		{{key: "e:fine", l: l, cost: 1}, {key: "e:corrupt", l: l, cost: 1}},
	} {
		_, err := runScript(ctx, c, 1, reqs)
		if err == nil || !strings.Contains(err.Error(), "malformed state") {
			t.Fatalf("corrupt state: %v, want malformed state", err)
		}
	}
	// So is a sliding window log whose header does not describe a ring,
	// and a token bucket of the wrong length.
	tb := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Period: time.Second}
	for _, tc := range []struct {
		v string
		l algorithms.Limit
	}{{"\xff", swl}, {strings.Repeat("\x00", 19), swl}, {"\x02" + strings.Repeat("\x00", 24), swl}, {"\x01", tb}, {strings.Repeat("\x00", 9), tb}} {
		if err := c.Set(ctx, "e:corrupt", tc.v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := runScript(ctx, c, 1, []luaReq{{key: "e:corrupt", l: tc.l, cost: 1}})
		if err == nil || !strings.Contains(err.Error(), "malformed state") {
			t.Fatalf("corrupt %v %q: %v, want malformed state", tc.l.Algorithm, tc.v, err)
		}
	}
}

// TestWireInts: ARGV's encoding (lua/lib.lua) carries every integer the
// store sends exactly.
func TestWireInts(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	// A script that decodes the header and request in ARGV[1] with
	// lib.lua's formats and returns their fields.
	echo := redis.NewScript(luaLib + `
local now, keep, write = read_header(ARGV[1])
local h, requests, period_ms, burst, cost = struct.unpack(REQ_FMT, ARGV[1], HDR_LEN + 1)
local function s(v) return string.format('%.0f', v) end
return {s(now), s(keep), write, h % 8, (h - h % 8) / 8, s(requests), s(period_ms), s(burst), s(cost)}`)
	vals := []int64{0, 1, 127, 128, 255, 256, 1000, 1 << 31, 1<<50 - 1, algorithms.MaxScaled, 1<<53 - 1, 1 << 53}
	for _, v := range vals {
		for _, cost := range []int64{v, -v, 1 << 62, -1 << 62} {
			h := header{nowMs: v - 1, keepMs: v, probe: v%2 == 0}
			// A sliding window: its numbers travel as they are (a
			// bucket's are reduced to lowest terms first).
			l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: max(v, 1), Period: time.Duration(max(v%(1<<40), 1)) * time.Millisecond, Burst: v}
			bin := appendRequest(appendHeader(nil, h), l, cost, true, 0, h)
			write := int64(1)
			if h.probe {
				write = 0
			}
			want := []any{fmt.Sprint(max(h.nowMs, -1)), fmt.Sprint(min(h.keepMs, maxWireCost)), write, int64(2), int64(1),
				fmt.Sprint(l.Requests), fmt.Sprint(l.Period.Milliseconds()), fmt.Sprint(l.Burst), fmt.Sprint(min(max(cost, -maxWireCost), maxWireCost))}
			got, err := echo.Run(ctx, c, nil, bin).Slice()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("value %d, cost %d: Lua read %v, want %v", v, cost, got, want)
			}
		}
	}
}

func TestDecodeReply(t *testing.T) {
	rec := func(allowed byte, f ...int64) string { // remaining, retry, reset, ttl, wait
		b := binary.LittleEndian.AppendUint64(nil, uint64(4*f[0]+int64(allowed)))
		for _, v := range f[1:] {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return string(b)
	}
	caps := func(int) int64 { return 5 }
	reset := int64(2000)
	short := string(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 4*3+1), uint64(-2-2*reset)))
	waiting := string(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 4*3+1), uint64(-3-2*reset)), 70))
	ok := rec(1, 4, 0, 1000, 1000, 250) + rec(0, 0, -1, 0, 0, 0) + short + waiting
	out := make([]algorithms.Decision, 4)
	if err := decodeReply(ok, out, caps); err != nil {
		t.Fatal(err)
	}
	want := []algorithms.Decision{
		{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: time.Second, TTL: time.Second, Wait: 250 * time.Millisecond},
		{Allowed: false, Limit: 5, RetryAfter: algorithms.Never},
		{Allowed: true, Limit: 5, Remaining: 3, ResetAfter: 2 * time.Second, TTL: 2 * time.Second},
		{Allowed: true, Limit: 5, Remaining: 3, ResetAfter: 2 * time.Second, TTL: 2 * time.Second, Wait: 70 * time.Millisecond},
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("decision %d: got %+v, want %+v", i, out[i], want[i])
		}
	}
	bad := map[string]any{
		"not a string":   []any{int64(1)},
		"nil":            nil,
		"short":          ok[:len(ok)-1],
		"long":           ok + "x",
		"allowed 3":      rec(3, 4, 0, 1000, 1000, 0) + rec(0, 0, -1, 0, 0, 0) + short + waiting,
		"retry -2":       rec(1, 4, -2, 1000, 1000, 0) + rec(0, 0, -1, 0, 0, 0) + short + waiting,
		"negative ttl":   rec(1, 4, 0, 1000, -5, 0) + rec(0, 0, -1, 0, 0, 0) + short + waiting,
		"negative reset": rec(1, 4, 0, -1, 1000, 0) + rec(0, 0, -1, 0, 0, 0) + short + waiting,
		"negative wait":  rec(1, 4, 0, 1000, 1000, -1) + rec(0, 0, -1, 0, 0, 0) + short + waiting,
		"short cut":      rec(1, 4, 0, 1000, 1000, 0) + rec(0, 0, -1, 0, 0, 0) + short + waiting[:20],
	}
	for name, reply := range bad {
		if err := decodeReply(reply, out, caps); !errors.Is(err, errReply) {
			t.Errorf("%s: error %v, want errReply", name, err)
		}
	}
}

// TestLuaLongReply: a call of more requests than the script packs at
// once answers each as a call of its own would: its reply, packed in
// parts, holds every record (short and long) in order.
func TestLuaLongReply(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	tb := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Period: time.Second}
	lb := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 5, Period: time.Second}
	var batch, alone []luaReq
	for i := range 150 {
		l := tb
		if i%3 == 0 {
			l = lb
		}
		cost := int64(i % 8) // short records, and long ones (a cost above 5 never fits)
		if i < 120 {
			l, cost = tb, 1 // short records only: more integers than one pack holds
		}
		r := luaReq{key: fmt.Sprintf("long:a%d", i), l: l, cost: cost, group: true}
		batch = append(batch, r)
		r.key = fmt.Sprintf("long:b%d", i)
		alone = append(alone, r)
	}
	keys, args := scriptArgs(header{nowMs: 1_000_000, keepMs: keepMs}, batch)
	reply, err := decideLua.Run(ctx, c, keys, args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]algorithms.Decision, len(batch))
	if err := decodeReply(reply, got, func(i int) int64 { return batch[i].l.Capacity() }); err != nil {
		t.Fatal(err)
	}
	lens := map[int]int{}
	for s := reply.(string); s != ""; s = s[recordLen(s):] {
		lens[recordLen(s)]++
	}
	if lens[replyShort] == 0 || lens[replyLen] == 0 {
		t.Fatalf("records by length %v: want short and long records", lens)
	}
	for i, r := range alone {
		want, err := runScript(ctx, c, 1_000_000, []luaReq{r})
		if err != nil {
			t.Fatal(err)
		}
		if got[i] != want[0] {
			t.Fatalf("request %d of 150 in one call: %+v, alone %+v", i, got[i], want[0])
		}
	}
}
