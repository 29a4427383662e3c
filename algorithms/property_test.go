package algorithms_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// Property tests: seeded random traces of (Δt, cost) through every
// algorithm, checked against what the algorithms promise. The seed is
// logged; set FLOODGATE_TEST_SEED to replay one.

// testRand returns a generator seeded from FLOODGATE_TEST_SEED or the clock,
// and logs the seed.
func testRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("FLOODGATE_TEST_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("FLOODGATE_TEST_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (replay with FLOODGATE_TEST_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// randomLimit draws a small valid limit for alg: small enough that every
// window of a trace can be checked, varied enough to hit odd rates.
func randomLimit(r *rand.Rand, alg algorithms.Algorithm) algorithms.Limit {
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond, 1234 * time.Millisecond, time.Second, 2 * time.Second, time.Minute}
	l := algorithms.Limit{Algorithm: alg, Period: periods[r.IntN(len(periods))], Requests: 1 + r.Int64N(20)}
	if r.IntN(5) == 0 {
		l.Requests = 1 + r.Int64N(300)
	}
	if alg == algorithms.TokenBucket && r.IntN(2) == 0 {
		l.Burst = 1 + r.Int64N(3*l.Requests)
	}
	return l
}

// op is one step of a trace: move the clock by dt ms, then spend cost.
type op struct{ dt, cost int64 }

// traceOpts says which steps a trace may contain.
type traceOpts struct {
	refunds bool // negative costs
	back    bool // the clock going back
}

// randomTrace draws n steps for l: bursts at one instant, gaps around the
// refill interval and the period, costs from peeks to above the capacity.
func randomTrace(r *rand.Rand, l algorithms.Limit, n int, o traceOpts) []op {
	w := l.Period.Milliseconds()
	gap := max(1, w/l.Requests)
	c := l.Capacity()
	trace := make([]op, n)
	for i := range trace {
		var dt int64
		switch x := r.IntN(100); {
		case x < 30:
			dt = 0
		case x < 70:
			dt = r.Int64N(2*gap + 1)
		case x < 92:
			dt = r.Int64N(2*w + 1)
		case x < 97:
			dt = r.Int64N(10*w + 1)
		default:
			if o.back {
				dt = -r.Int64N(2*w + 1)
			} else {
				dt = r.Int64N(3)
			}
		}
		var cost int64
		switch x := r.IntN(100); {
		case x < 10:
			cost = 0
		case x < 60:
			cost = 1
		case x < 90:
			cost = 1 + r.Int64N(c)
		case x < 93:
			cost = c + 1 + r.Int64N(3)
		default:
			if o.refunds {
				cost = -1 - r.Int64N(c+1)
			} else {
				cost = 1
			}
		}
		trace[i] = op{dt, cost}
	}
	return trace
}

// event is one decision of a played trace.
type event struct {
	at     int64 // Unix ms
	cost   int64
	before algorithms.State
	after  algorithms.State
	d      algorithms.Decision
}

// play runs trace from the zero state starting at epoch.
func play(l algorithms.Limit, trace []op) []event {
	now := epoch.UnixMilli()
	var s algorithms.State
	events := make([]event, len(trace))
	for i, o := range trace {
		now += o.dt
		next, d := algorithms.DecideAt(l, s, algorithms.Request{NowMs: now, Cost: o.cost})
		events[i] = event{at: now, cost: o.cost, before: s, after: next, d: d}
		s = next
	}
	return events
}

// forEachTrace draws rounds random limits and traces for every algorithm
// and calls check on each played trace.
func forEachTrace(t *testing.T, rounds, steps int, o traceOpts, check func(t *testing.T, l algorithms.Limit, events []event)) {
	r := testRand(t)
	for _, alg := range algorithms.All() {
		t.Run(alg.String(), func(t *testing.T) {
			for round := 0; round < rounds && !t.Failed(); round++ {
				l := randomLimit(r, alg)
				check(t, l, play(l, randomTrace(r, l, steps, o)))
			}
		})
	}
}

// desc names a limit in failure messages.
func desc(l algorithms.Limit) string {
	s := l.Algorithm.String() + " " + strconv.FormatInt(l.Requests, 10) + "/" + l.Period.String()
	if l.Burst != 0 {
		s += " burst " + strconv.FormatInt(l.Burst, 10)
	}
	return s
}

func rel(ms int64) time.Duration { return time.Duration(ms-epoch.UnixMilli()) * time.Millisecond }

// TestPropertyAdmissionBounds checks each algorithm's promise on how much it
// admits, over traces whose clock only moves forward.
func TestPropertyAdmissionBounds(t *testing.T) {
	t.Run("spends", func(t *testing.T) { forEachTrace(t, 200, 150, traceOpts{}, checkAdmissionBounds) })
	t.Run("spends+refunds", func(t *testing.T) { forEachTrace(t, 200, 150, traceOpts{refunds: true}, checkAdmissionBounds) })
}

func checkAdmissionBounds(t *testing.T, l algorithms.Limit, events []event) {
	w, req := l.Period.Milliseconds(), l.Requests
	switch l.Algorithm {
	case algorithms.TokenBucket:
		// Starting from a full bucket, the net spent over any span of
		// decisions [i, j] is at most burst + r·(t_j − t_i); refunds
		// count negative.
		for i := range events {
			net := int64(0)
			for j := i; j < len(events); j++ {
				if events[j].d.Allowed {
					net += max(events[j].cost, -l.Capacity())
				}
				if net*w > l.Capacity()*w+req*(events[j].at-events[i].at) {
					t.Fatalf("%s: decisions %d..%d (t0+%v..t0+%v) spent %d, above burst + rate", desc(l), i, j, rel(events[i].at), rel(events[j].at), net)
				}
			}
		}
	case algorithms.SlidingWindowLog:
		// Every window (t − W, t] holds at most Requests. Refunds
		// remove the newest entries, so the log is rebuilt the same
		// way to know what each window holds.
		var log []refEntry
		for j, e := range events {
			if !e.d.Allowed || e.cost == 0 {
				continue
			}
			if e.cost > 0 {
				log = append(log, refEntry{At: e.at, N: e.cost})
			} else {
				for refund := -e.cost; refund > 0 && len(log) > 0; {
					n := len(log) - 1
					// Only entries still in the window can be refunded.
					if log[n].At <= e.at-w {
						break
					}
					take := min(refund, log[n].N)
					log[n].N -= take
					refund -= take
					if log[n].N == 0 {
						log = log[:n]
					}
				}
			}
			sum := int64(0)
			for _, le := range log {
				if le.At > e.at-w {
					sum += le.N
				}
			}
			if sum > req {
				t.Fatalf("%s: after decision %d (t0+%v) the window holds %d, above %d", desc(l), j, rel(e.at), sum, req)
			}
		}
	case algorithms.SlidingWindow, algorithms.FixedWindow:
		// Count admitted units per aligned window; refunds come off the
		// current window first, then the previous one.
		counts := map[int64]int64{}
		for j, e := range events {
			k := e.at / w
			if e.d.Allowed && e.cost > 0 {
				counts[k] += e.cost
			} else if e.d.Allowed && e.cost < 0 {
				refund := -e.cost
				take := min(counts[k], refund)
				counts[k] -= take
				if l.Algorithm == algorithms.SlidingWindow {
					counts[k-1] = max(0, counts[k-1]-(refund-take))
				}
			}
			if l.Algorithm == algorithms.FixedWindow {
				if counts[k] > req {
					t.Fatalf("%s: window %d holds %d after decision %d, above %d", desc(l), k, counts[k], j, req)
				}
				continue
			}
			// The estimate, times W, never exceeds the limit, times W.
			est := counts[k]*w + counts[k-1]*(w-e.at%w)
			if est > req*w {
				t.Fatalf("%s: after decision %d (t0+%v) the estimate is %d/%d, above %d", desc(l), j, rel(e.at), est, w, req)
			}
		}
	}
}

// allTraceOpts are the trace kinds the exactness properties run on.
var allTraceOpts = []traceOpts{{}, {refunds: true}, {refunds: true, back: true}}

func forEachTraceKind(t *testing.T, rounds, steps int, check func(t *testing.T, l algorithms.Limit, events []event)) {
	for _, o := range allTraceOpts {
		name := "forward"
		if o.refunds {
			name += "+refunds"
		}
		if o.back {
			name += "+clock_back"
		}
		t.Run(name, func(t *testing.T) { forEachTrace(t, rounds, steps, o, check) })
	}
}

// TestPropertyDecision checks the rules every decision obeys, the same ones
// the fuzz target checks.
func TestPropertyDecision(t *testing.T) {
	forEachTraceKind(t, 100, 150, func(t *testing.T, l algorithms.Limit, events []event) {
		for i, e := range events {
			if err := checkDecision(l, e.cost, e.d); err != nil {
				t.Fatalf("%s: decision %d (t0+%v, cost %d): %v", desc(l), i, rel(e.at), e.cost, err)
			}
		}
	})
}

// TestPropertyRetryAfterExact: waiting RetryAfter − 1ms still denies the
// same cost, waiting RetryAfter admits it, with no other traffic.
func TestPropertyRetryAfterExact(t *testing.T) {
	forEachTraceKind(t, 100, 150, func(t *testing.T, l algorithms.Limit, events []event) {
		for i, e := range events {
			if e.d.Allowed || e.d.RetryAfter == algorithms.Never {
				continue
			}
			wait := e.d.RetryAfter.Milliseconds()
			if wait > 1 {
				if _, d := algorithms.DecideAt(l, e.before, algorithms.Request{NowMs: e.at + wait - 1, Cost: e.cost}); d.Allowed {
					t.Fatalf("%s: decision %d (t0+%v, cost %d) said retry after %v, but %v admits it", desc(l), i, rel(e.at), e.cost, e.d.RetryAfter, e.d.RetryAfter-time.Millisecond)
				}
			}
			if _, d := algorithms.DecideAt(l, e.before, algorithms.Request{NowMs: e.at + wait, Cost: e.cost}); !d.Allowed {
				t.Fatalf("%s: decision %d (t0+%v, cost %d) said retry after %v, but then got %+v", desc(l), i, rel(e.at), e.cost, e.d.RetryAfter, d)
			}
		}
	})
}

// TestPropertyRemainingExact: after an allowed decision, Remaining more
// can be spent at the same instant, in one cost or one by one, and not a
// unit more.
func TestPropertyRemainingExact(t *testing.T) {
	forEachTraceKind(t, 100, 150, func(t *testing.T, l algorithms.Limit, events []event) {
		for i, e := range events {
			if !e.d.Allowed {
				continue
			}
			rem := e.d.Remaining
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("%s: decision %d (t0+%v, cost %d, remaining %d): "+format, append([]any{desc(l), i, rel(e.at), e.cost, rem}, args...)...)
			}
			if rem > 0 {
				if _, d := algorithms.DecideAt(l, e.after, algorithms.Request{NowMs: e.at, Cost: rem}); !d.Allowed {
					fail("spending %d at once: got %+v", rem, d)
				}
			}
			if _, d := algorithms.DecideAt(l, e.after, algorithms.Request{NowMs: e.at, Cost: rem + 1}); d.Allowed {
				fail("spending %d at once was allowed", rem+1)
			}
			if rem > 25 {
				continue
			}
			s := e.after
			for k := range rem {
				var d algorithms.Decision
				if s, d = algorithms.DecideAt(l, s, algorithms.Request{NowMs: e.at, Cost: 1}); !d.Allowed || d.Remaining != rem-k-1 {
					fail("unit %d of %d: got %+v", k+1, rem, d)
				}
			}
			if _, d := algorithms.DecideAt(l, s, algorithms.Request{NowMs: e.at, Cost: 1}); d.Allowed {
				fail("unit %d after spending %d one by one was allowed", rem+1, rem)
			}
		}
	})
}

// TestPropertyDenyAndPeekKeepState: a deny or a peek returns the very
// state it was given, and a peek reports what a deny reports.
func TestPropertyDenyAndPeekKeepState(t *testing.T) {
	forEachTraceKind(t, 100, 150, func(t *testing.T, l algorithms.Limit, events []event) {
		for i, e := range events {
			if (e.d.Allowed && e.cost != 0) || sameState(e.after, e.before) {
				continue
			}
			t.Fatalf("%s: decision %d (t0+%v, cost %d, allowed %v) changed the state from %+v to %+v", desc(l), i, rel(e.at), e.cost, e.d.Allowed, e.before, e.after)
		}
		for i, e := range events {
			if e.d.Allowed {
				continue
			}
			_, peek := algorithms.DecideAt(l, e.before, algorithms.Request{NowMs: e.at, Cost: 0})
			if peek.Remaining != e.d.Remaining || peek.ResetAfter != e.d.ResetAfter || peek.TTL != e.d.TTL {
				t.Fatalf("%s: decision %d (t0+%v, cost %d): deny %+v, peek %+v", desc(l), i, rel(e.at), e.cost, e.d, peek)
			}
		}
	})
}

// TestPropertyResetAfter: ResetAfter is exactly when a peek shows the full
// capacity again, and past the TTL the state decides like no state at all.
func TestPropertyResetAfter(t *testing.T) {
	r := testRand(t)
	forEachTraceKind(t, 60, 120, func(t *testing.T, l algorithms.Limit, events []event) {
		c := l.Capacity()
		for i, e := range events {
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("%s: decision %d (t0+%v, cost %d, %+v): "+format, append([]any{desc(l), i, rel(e.at), e.cost, e.d}, args...)...)
			}
			reset := e.d.ResetAfter.Milliseconds()
			if _, d := algorithms.DecideAt(l, e.after, algorithms.Request{NowMs: e.at + reset, Cost: 0}); d.Remaining != c {
				fail("a peek after ResetAfter: got %+v, want remaining %d", d, c)
			}
			if reset > 0 {
				if _, d := algorithms.DecideAt(l, e.after, algorithms.Request{NowMs: e.at + reset - 1, Cost: 0}); d.Remaining == c {
					fail("a peek 1ms before ResetAfter already shows the full capacity: %+v", d)
				}
			}
			// Past the TTL, the kept state and no state answer a random
			// continuation identically.
			kept, none := e.after, algorithms.State{}
			now := e.at + e.d.TTL.Milliseconds() + r.Int64N(2)*r.Int64N(2*l.Period.Milliseconds()+1)
			for k, o := range randomTrace(r, l, 6, traceOpts{refunds: true}) {
				now += o.dt
				var dk, dn algorithms.Decision
				kept, dk = algorithms.DecideAt(l, kept, algorithms.Request{NowMs: now, Cost: o.cost})
				none, dn = algorithms.DecideAt(l, none, algorithms.Request{NowMs: now, Cost: o.cost})
				if dk != dn {
					fail("step %d after the TTL (cost %d): kept state gives %+v, no state gives %+v", k, o.cost, dk, dn)
				}
			}
		}
	})
}
