package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// ttlStep is one Decide of a TTL test: its moment after the test's base,
// the limit it is decided under (the key's limit may change between
// calls, as a rules reload changes it), its cost and mode.
type ttlStep struct {
	at   time.Duration
	l    algorithms.Limit
	cost int64
	mode algorithms.Mode
}

// runTTLSteps decides steps on one key of a ClientTime store, each
// matching Go's decision, and checks after every step that the key's PTTL
// covers what Go says its state needs (the decision's TTL plus the hour
// ClientTime keeps) and exceeds it by at most 1/64 of that. The steps lie
// milliseconds apart on the simulated clock, so the key's end reads as
// now plus its PTTL whichever write set it. A fixed window's key is that
// of the window Go's state counts (State.A its end): the windows of an
// earlier limit keep keys of their own.
func runTTLSteps(t *testing.T, key string, steps []ttlStep) {
	t.Helper()
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	const keep = time.Hour // clientTimeKeep
	const slack = 2 * time.Second
	s := newStore(t, c, testConfig())
	defer s.Close()
	var state algorithms.State
	for i, st := range steps {
		now := monday.Add(st.at)
		req := store.Request{Key: key, Limit: st.l, Cost: st.cost, Mode: st.mode}
		d := decide(t, s, now, req)[0]
		next, model := goDecide(st.l, state, now, st.cost, st.mode)
		model.Debt = 0 // Decide does not report it
		if d != model {
			t.Fatalf("step %d (cost %d under %v): %+v, want Go's %+v", i, st.cost, st.l, d, model)
		}
		if !d.Allowed {
			t.Fatalf("step %d: denied; the test means every step to write", i)
		}
		state = next
		want := d.TTL + keep
		rk := redisstore.StateKey(st.l.Algorithm, key)
		if st.l.Algorithm.Facts().Afresh {
			rk = redisstore.WindowKey(st.l.Algorithm, key, next.A)
		}
		got, err := c.PTTL(ctx, rk).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got <= want-slack {
			t.Errorf("step %d (cost %d under %v): PTTL %v, but the state needs %v (Go's TTL %v plus %v): the key expires while its state still counts", i, st.cost, st.l, got, want, d.TTL, keep)
		} else if got > want+want/64+slack {
			t.Errorf("step %d (cost %d under %v): PTTL %v, the state needs %v (Go's TTL %v plus %v): the key outlives its state by more than 1/64", i, st.cost, st.l, got, want, d.TTL, keep)
		}
	}
}

// TestSlidingWindowKeyTTLLimitChange: a sliding window's key lives until
// its state's end under the limit it is decided with, when the limit
// changed since the key was written (a rules reload) and the stored window
// start is also a window start of the new limit, so the state is read on.
// A longer period, a calendar period of more days, or fewer requests
// (which turns the stored count into a debt, kept a window longer) move
// the state's end later; the write must move the key's TTL with it.
func TestSlidingWindowKeyTTLLimitChange(t *testing.T) {
	sw := func(n int64, p time.Duration) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: n, Period: p}
	}
	cal := func(n int64, c algorithms.Calendar) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: n, Calendar: c}
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		steps []ttlStep
	}{
		{"period 1h to 2h", []ttlStep{{ms, sw(10, time.Hour), 5, 0}, {2 * ms, sw(10, 2*time.Hour), 1, 0}}},
		{"period 1h to 1 day", []ttlStep{{ms, sw(10, time.Hour), 5, 0}, {2 * ms, sw(10, 24*time.Hour), 1, 0}}},
		{"calendar day to week", []ttlStep{{ms, cal(10, algorithms.Day), 5, 0}, {2 * ms, cal(10, algorithms.Week), 1, 0}}},
		{"calendar day to month", []ttlStep{{ms, cal(10, algorithms.Day), 5, 0}, {2 * ms, cal(10, algorithms.Month), 1, 0}}},
		{"fewer requests, a refund", []ttlStep{{ms, sw(10, time.Hour), 8, 0}, {2 * ms, sw(5, time.Hour), -1, 0}}},
		{"fewer requests, a debt", []ttlStep{{ms, sw(10, time.Hour), 8, 0}, {2 * ms, sw(5, time.Hour), 1, algorithms.Debt}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runTTLSteps(t, "swlim-"+tc.name, tc.steps)
		})
	}
}

// TestSlidingWindowKeyTTLLimitShrinks: when the limit changes the other
// way (a shorter period, a calendar period of fewer days, more requests
// than a stored debt), the write that follows leaves the key living no
// longer than its state needs, plus at most 1/64: Redis' memory holds no
// key weeks past its state's end.
func TestSlidingWindowKeyTTLLimitShrinks(t *testing.T) {
	sw := func(n int64, p time.Duration) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: n, Period: p}
	}
	cal := func(n int64, c algorithms.Calendar) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: n, Calendar: c}
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		steps []ttlStep
	}{
		{"period 1 day to 1h", []ttlStep{{ms, sw(10, 24*time.Hour), 5, 0}, {2 * ms, sw(10, time.Hour), 1, 0}}},
		{"calendar month to day", []ttlStep{{ms, cal(10, algorithms.Month), 5, 0}, {2 * ms, cal(10, algorithms.Day), 1, 0}}},
		{"more requests than a debt", []ttlStep{{ms, sw(10, time.Hour), 12, algorithms.Debt}, {2 * ms, sw(20, time.Hour), 1, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runTTLSteps(t, "swshrink-"+tc.name, tc.steps)
		})
	}
}

// TestSlidingWindowPeriodGrowsAdmitsNoMore: on Redis' clock (the
// production default), a key charged under 20 a second and then, its
// window start also a start of the new period's windows, under 20 every
// two seconds still holds its count when the next two-second window
// opens: its 11 weigh on that window's first half, so a charge of the
// whole 20 there is denied. A key that kept the one-second period's TTL
// is gone by then and lets the 20 through.
func TestSlidingWindowPeriodGrowsAdmitsNoMore(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second}) // Redis' clock
	defer s.Close()
	redisMs := func() int64 {
		t.Helper()
		tm, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	one := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 20, Period: time.Second}
	two := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 20, Period: 2 * time.Second}
	// A slow moment (the race detector, a loaded machine) can push a
	// charge out of the part of its window it needs: that attempt is
	// tried again on a new key.
	for attempt := range 5 {
		key := fmt.Sprintf("swgrow-%d", attempt)
		// Start 100 to 600 ms into a window of two seconds.
		now := redisMs()
		for now%2000 < 100 || now%2000 > 600 {
			time.Sleep(20 * time.Millisecond)
			now = redisMs()
		}
		a := now - now%2000
		if d := decide(t, s, time.Now(), store.Request{Key: key, Limit: one, Cost: 10})[0]; !d.Allowed {
			t.Fatalf("10 of 20 a second: %+v, want allowed", d)
		}
		if d := decide(t, s, time.Now(), store.Request{Key: key, Limit: two, Cost: 1})[0]; !d.Allowed {
			t.Fatalf("1 more under 20 every 2 s: %+v, want allowed", d)
		}
		if redisMs() >= a+1000 {
			continue // the two charges must fall in the one-second window
		}
		// 100 ms into the next two-second window.
		for now = redisMs(); now < a+2100; now = redisMs() {
			time.Sleep(time.Duration(a+2100-now) * time.Millisecond)
		}
		d := decide(t, s, time.Now(), store.Request{Key: key, Limit: two, Cost: 20})[0]
		if redisMs() >= a+3000 {
			continue // the charge must fall in the window's first half
		}
		if d.Allowed {
			t.Errorf("20 of 20 in the window after 11 were counted: allowed (%+v); the previous window's count was lost", d)
		}
		return
	}
	t.Fatal("no attempt ran in time")
}

// TestFixedWindowKeyTTLLimitChange: a fixed window's count key lives until
// the end of the window it counts under the limit it is decided with,
// when the limit's period grew since the key was created and the stored
// window's start is also a start of the new period's windows (the same
// window key).
func TestFixedWindowKeyTTLLimitChange(t *testing.T) {
	fw := func(n int64, p time.Duration) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Period: p}
	}
	cal := func(n int64, c algorithms.Calendar) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Calendar: c}
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		steps []ttlStep
	}{
		{"period 1h to 2h", []ttlStep{{ms, fw(10, time.Hour), 5, 0}, {2 * ms, fw(10, 2*time.Hour), 1, 0}}},
		{"calendar day to month", []ttlStep{{ms, cal(10, algorithms.Day), 5, 0}, {2 * ms, cal(10, algorithms.Month), 1, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runTTLSteps(t, "fwlim-"+tc.name, tc.steps)
		})
	}
}
