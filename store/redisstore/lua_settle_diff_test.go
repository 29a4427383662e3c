package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
)

// settleCounts tallies the differential trace's settlements, so that a
// trace too tame to compare Debt and Unrecorded fails.
type settleCounts struct {
	settles, owing, unrecorded, outOfRange int
}

// settleStep settles a random delta on key (limit l) through settle.lua
// at nowMs and compares the whole reply, Debt and Unrecorded included,
// with algorithms.Settle on the model's state (for a calendar limit: the
// same charge on the boundaries around floodgate's clock, which is now
// and then a period behind Redis', where nothing can be recorded).
func settleStep(t *testing.T, c *redis.Client, m *luaModel, rng *rand.Rand, step int, nowMs int64, key string, l algorithms.Limit) {
	t.Helper()
	capacity := l.Capacity()
	var delta int64
	switch p := rng.IntN(10); {
	case p < 4: // a little more used than reserved
		delta = 1 + rng.Int64N(max(capacity/2, 1))
	case p < 7: // far more: debt up to its bound, and beyond
		delta = capacity + rng.Int64N(3*capacity+2)
	case p < 9: // less: a refund
		delta = -1 - rng.Int64N(capacity+1)
	}
	calMs := m.calMs
	if l.Calendar != algorithms.NoCalendar && rng.IntN(4) == 0 {
		calMs = nowMs - 40*86_400_000 // Redis' clock more than a period ahead
	}
	var bounds algorithms.Bounds
	if l.Calendar != algorithms.NoCalendar {
		bounds = l.Calendar.Bounds(l.Location, calMs)
	}
	mk := modelKey(key, l, nowMs, bounds)
	s := m.states[mk]
	var next algorithms.State
	var want algorithms.Decision
	if l.Calendar != algorithms.NoCalendar {
		b := l.Calendar.Bounds(l.Location, calMs)
		next, want = algorithms.DecideAt(l, s, algorithms.Request{NowMs: nowMs, Cost: delta, Mode: algorithms.Debt, Bounds: b})
		_, one := algorithms.DecideAt(l, next, algorithms.Request{NowMs: nowMs, Cost: 1, Bounds: b})
		want.Allowed, want.RetryAfter = true, one.RetryAfter
		if nowMs >= b[3] {
			m.settled.outOfRange++
		}
	} else {
		next, want = algorithms.Settle(l, s, nowMs, delta)
	}
	want.Wait = 0 // not a settlement's number (store.SettleResult); its reply has none
	h := header{nowMs: nowMs, keepMs: keepMs, calMs: calMs}
	arg := appendRequest(appendHeader(nil, h), l, delta, false, algorithms.Debt, h)
	record := fmt.Sprintf("%s/settle/%d", key, step)
	reply, err := settleLua.Run(context.Background(), c, []string{key, record}, arg, "fp", strconv.FormatInt(keepMs, 10)).Result()
	if err != nil {
		t.Fatalf("step %d (now %d): settle %d on %s (%+v): %v", step, nowMs, delta, key, l, err)
	}
	got, err := decodeSettleReply(reply, l.Capacity())
	if err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	if got.Decision != want || got.Duplicate {
		t.Fatalf("step %d (now %d, floodgate's clock %d): settle %d on %s, limit %+v:\n got (lua) %+v duplicate %v\nwant (go)  %+v",
			step, nowMs, calMs, delta, key, l, got.Decision, got.Duplicate, want)
	}
	m.settled.settles++
	if want.Debt > 0 {
		m.settled.owing++
	}
	if want.Unrecorded > 0 {
		m.settled.unrecorded++
	}
	if delta != 0 {
		m.put(mk, l, next, want.TTL)
	}
}

// checkSettles fails a trace whose settlements never owed or never left
// a part unrecorded (every algorithm but the log owes; calendar limits,
// on the window algorithms, reach the out-of-range case).
func checkSettles(t *testing.T, m *luaModel, algs [4]algorithms.Algorithm) {
	t.Helper()
	s := m.settled
	owes := algs[0] != algorithms.SlidingWindowLog
	calendar := algs[0] == algorithms.SlidingWindow || algs[0] == algorithms.FixedWindow
	if s.settles == 0 || s.unrecorded == 0 || (owes && s.owing == 0) || (calendar && algs == [4]algorithms.Algorithm{algs[0], algs[0], algs[0], algs[0]} && s.outOfRange == 0) {
		t.Fatalf("settlements too tame: %+v", s)
	}
}
