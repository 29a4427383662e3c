package algorithms_test

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// leakyStep is one row of a leaky bucket table: move the clock, decide
// cost in mode, expect the decision.
type leakyStep struct {
	advance time.Duration
	cost    int64
	mode    algorithms.Mode

	allowed   bool
	wait      time.Duration
	remaining int64
	retry     time.Duration
	reset     time.Duration
	limit     *algorithms.Limit
}

func runLeaky(t *testing.T, l algorithms.Limit, steps []leakyStep) algorithms.State {
	t.Helper()
	var s algorithms.State
	now := epoch.UnixMilli()
	for i, st := range steps {
		if st.limit != nil {
			l = *st.limit
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		now += st.advance.Milliseconds()
		next, d := algorithms.DecideAt(l, s, algorithms.Request{NowMs: now, Cost: st.cost, Mode: st.mode})
		want := algorithms.Decision{Allowed: st.allowed, Limit: l.Capacity(), Remaining: st.remaining,
			RetryAfter: st.retry, ResetAfter: st.reset, Wait: st.wait, TTL: st.reset}
		if d != want {
			t.Errorf("step %d (t0+%dms, cost %d, mode %d):\n got %+v\nwant %+v", i, now-epoch.UnixMilli(), st.cost, st.mode, d, want)
		}
		if err := checkDecision(l, st.cost, d); err != nil {
			t.Errorf("step %d: %v", i, err)
		}
		if (!d.Allowed || st.cost == 0) && !sameState(next, s) {
			t.Errorf("step %d: a deny or a peek changed the state: %+v -> %+v", i, s, next)
		}
		s = next
	}
	return s
}

// TestLeakyBucketSteps walks a queue of 3 draining at 10/s (a slot every
// 100ms): waits instead of denies, a full queue, refunds, peeks and
// NoWait.
func TestLeakyBucketSteps(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: time.Second, Burst: 3}
	ms := time.Millisecond
	runLeaky(t, l, []leakyStep{
		{cost: 0, allowed: true, remaining: 3},
		{cost: 1, allowed: true, wait: 0, remaining: 2, reset: 100 * ms},
		{cost: 1, allowed: true, wait: 100 * ms, remaining: 1, reset: 200 * ms},
		{cost: 1, allowed: true, wait: 200 * ms, remaining: 0, reset: 300 * ms},
		// Full: denied until a place frees, to the ms.
		{cost: 1, allowed: false, remaining: 0, retry: 100 * ms, reset: 300 * ms},
		{advance: 99 * ms, cost: 1, allowed: false, remaining: 0, retry: 1 * ms, reset: 201 * ms},
		{advance: 1 * ms, cost: 1, allowed: true, wait: 200 * ms, remaining: 0, reset: 300 * ms},
		// A peek reports the wait a check would get.
		{advance: 50 * ms, cost: 0, allowed: true, wait: 250 * ms, remaining: 0, reset: 250 * ms},
		// Two slots: the queue must hold both.
		{advance: 100 * ms, cost: 2, allowed: false, remaining: 1, retry: 50 * ms, reset: 150 * ms},
		{advance: 50 * ms, cost: 2, allowed: true, wait: 100 * ms, remaining: 0, reset: 300 * ms},
		// NoWait: denied while anything is queued, until the queue is empty.
		{cost: 1, mode: algorithms.NoWait, allowed: false, remaining: 0, retry: 300 * ms, reset: 300 * ms},
		// A give-back frees nothing (it cannot say which slots are its own).
		{cost: -1, allowed: true, remaining: 0, reset: 300 * ms},
		{cost: 0, allowed: true, wait: 300 * ms, remaining: 0, reset: 300 * ms},
		{cost: -3, allowed: true, remaining: 0, reset: 300 * ms},
		{advance: 300 * ms, cost: 1, mode: algorithms.NoWait, allowed: true, remaining: 0, reset: 100 * ms},
		{cost: 1, mode: algorithms.NoWait, allowed: false, remaining: 0, retry: 100 * ms, reset: 100 * ms},
		// Above the queue's size: never.
		{cost: 4, allowed: false, remaining: 2, retry: algorithms.Never, reset: 100 * ms},
		// A give-back to an empty queue leaves it empty.
		{advance: time.Hour, cost: -2, allowed: true, remaining: 3, reset: 0},
		{advance: time.Hour, cost: 3, allowed: true, remaining: 0, reset: 300 * ms},
	})
}

// TestLeakyBucketExactStarts: at 3/s a slot is 1000/3 ms. Starts are the
// exact slots rounded up to a ms, so they are 334, 333, 333 ms apart and
// every third lands on a whole second, however long the queue runs.
func TestLeakyBucketExactStarts(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 3, Period: time.Second, Burst: 3000}
	var s algorithms.State
	t0 := epoch.UnixMilli()
	now := t0
	for k := int64(0); k < 3000; k++ {
		if k%7 == 6 {
			now++ // arrivals spread a little; the starts must not care
		}
		var d algorithms.Decision
		s, d = algorithms.DecideAt(l, s, algorithms.Request{NowMs: now, Cost: 1})
		if !d.Allowed {
			t.Fatalf("request %d denied: %+v", k, d)
		}
		start := now + d.Wait.Milliseconds()
		if want := t0 + (k*1000+2)/3; start != want {
			t.Fatalf("request %d starts at t0+%d, want t0+%d", k, start-t0, want-t0)
		}
	}
}

// TestLeakyBucketClockBack: a clock that goes back keeps the queue's end
// where it was, so starts keep their spacing; waits grow by the lag.
func TestLeakyBucketClockBack(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: time.Second, Burst: 4}
	ms := time.Millisecond
	runLeaky(t, l, []leakyStep{
		{cost: 1, allowed: true, remaining: 3, reset: 100 * ms},
		{cost: 1, allowed: true, wait: 100 * ms, remaining: 2, reset: 200 * ms},
		// The queue is measured from now: 250ms of it are taken.
		{advance: -50 * ms, cost: 1, allowed: true, wait: 250 * ms, remaining: 0, reset: 350 * ms},
		// Far back: the queue looks full until the clock catches up.
		{advance: -time.Hour, cost: 1, allowed: false, remaining: 0, retry: time.Hour + 50*ms, reset: time.Hour + 350*ms},
		{advance: time.Hour + 50*ms, cost: 1, allowed: true, wait: 300 * ms, remaining: 0, reset: 400 * ms},
	})
}

// TestLeakyBucketRateChange: a reload that changes the rate keeps the
// queue's end, rounded up to a whole ms, and spaces new starts at the new
// rate.
func TestLeakyBucketRateChange(t *testing.T) {
	three := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 3, Period: time.Second, Burst: 5}
	ten := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: time.Second, Burst: 5}
	ms := time.Millisecond
	runLeaky(t, three, []leakyStep{
		{cost: 1, allowed: true, remaining: 4, reset: 334 * ms}, // end 333.33
		{limit: &ten, cost: 1, allowed: true, wait: 334 * ms, remaining: 0, reset: 434 * ms},
		{cost: 1, allowed: false, remaining: 0, retry: 34 * ms, reset: 434 * ms},
	})
}

// TestLeakyBucketMatchesModel runs random sequences (the clock going back
// included) against a model in exact rationals: the queue's end as a
// big.Rat, admitted iff the cost's slots fit in Burst slots from now, the
// start the exact slot rounded up. It also checks the spacing every
// caller relies on: a later start is never less than ⌊c × period /
// requests⌋ ms after one of cost c.
func TestLeakyBucketMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 5))
	for round := range 300 {
		l := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 1 + rng.Int64N(40),
			Period: time.Duration(1+rng.Int64N(3000)) * time.Millisecond, Burst: rng.Int64N(12)}
		if l.Validate() != nil {
			continue
		}
		slot := big.NewRat(l.Period.Milliseconds(), l.Requests)
		c := l.Capacity()
		full := new(big.Rat).Mul(slot, big.NewRat(c, 1))
		var s algorithms.State
		var end *big.Rat // nil: empty
		now := epoch.UnixMilli()
		lastStart, lastCost := int64(-1), int64(0)
		for i := range 200 {
			now += rng.Int64N(3*l.Period.Milliseconds()/l.Requests+2) - 1
			if rng.IntN(40) == 0 {
				now -= rng.Int64N(500) // the clock goes back
			}
			cost := 1 + rng.Int64N(c)
			if rng.IntN(8) == 0 {
				cost = -cost
			}
			var mode algorithms.Mode
			if rng.IntN(4) == 0 {
				mode = algorithms.NoWait
			}
			next, d := algorithms.DecideAt(l, s, algorithms.Request{NowMs: now, Cost: cost, Mode: mode})
			// The model.
			nowR := big.NewRat(now, 1)
			start := nowR
			if end != nil && end.Cmp(nowR) > 0 {
				start = end
			}
			wait := ceilRat(new(big.Rat).Sub(start, nowR))
			newEnd := new(big.Rat).Add(start, new(big.Rat).Mul(slot, big.NewRat(cost, 1)))
			fits := new(big.Rat).Sub(newEnd, nowR).Cmp(full) <= 0
			if mode == algorithms.NoWait {
				fits = fits && wait == 0
			}
			where := func() string {
				return fmt.Sprintf("%d/%v burst %d, round %d step %d", l.Requests, l.Period, l.Burst, round, i)
			}
			switch {
			case cost > 0 && d.Allowed != fits:
				t.Fatalf("%s: cost %d wait %d: allowed %v, model %v (%+v)", where(), cost, wait, d.Allowed, fits, d)
			case cost > 0 && d.Allowed:
				if d.Wait.Milliseconds() != wait {
					t.Fatalf("%s: wait %v, model %dms", where(), d.Wait, wait)
				}
				st := now + wait
				if lastStart >= 0 {
					minGap := floorRat(new(big.Rat).Mul(slot, big.NewRat(lastCost, 1)))
					if st-lastStart < minGap {
						t.Fatalf("%s: start %d after %d, less than %dms", where(), st, lastStart, minGap)
					}
				}
				lastStart, lastCost = st, cost
				end = newEnd
			case cost < 0:
				// A give-back frees nothing: the end stays, and so
				// does the spacing from the last start.
				if d.Wait != 0 || !d.Allowed || !sameState(next, s) {
					t.Fatalf("%s: give-back %d: %+v, state %+v -> %+v", where(), cost, d, s, next)
				}
			}
			if !d.Allowed && cost > 0 {
				// RetryAfter is exact: at now+r it fits (in the model),
				// at now+r-1 it does not.
				r := d.RetryAfter.Milliseconds()
				fitsAt := func(at int64) bool {
					a := big.NewRat(at, 1)
					st := a
					if end != nil && end.Cmp(a) > 0 {
						st = end
					}
					if mode == algorithms.NoWait && st.Cmp(a) > 0 {
						return false
					}
					e := new(big.Rat).Add(st, new(big.Rat).Mul(slot, big.NewRat(cost, 1)))
					return new(big.Rat).Sub(e, a).Cmp(full) <= 0
				}
				if r <= 0 || !fitsAt(now+r) || fitsAt(now+r-1) {
					t.Fatalf("%s: cost %d denied with RetryAfter %v, not the exact wait", where(), cost, d.RetryAfter)
				}
			}
			if err := checkDecision(l, cost, d); err != nil {
				t.Fatalf("%s: %v", where(), err)
			}
			s = next
		}
	}
}

func ceilRat(r *big.Rat) int64 {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func floorRat(r *big.Rat) int64 {
	q, _ := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	return q.Int64()
}

func TestLeakyBucketValidate(t *testing.T) {
	for _, tc := range []struct {
		l    algorithms.Limit
		want string
	}{
		{algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 1, Period: time.Duration(1<<41) * time.Millisecond, Burst: 3}, "longer than"},
		{algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 3, Period: 1 << 40 * time.Millisecond, Burst: 1 << 20}, "too fine-grained"},
		{algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: time.Second, Burst: -1}, "burst"},
	} {
		err := tc.l.Validate()
		if err == nil || !errors.Is(err, algorithms.ErrInvalidLimit) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an invalid limit naming %q", tc.l, err, tc.want)
		}
	}
	ok := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 1 << 50, Period: time.Millisecond, Burst: 1}
	if err := ok.Validate(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
}

// TestLeakyBucketGiveBackKeepsSpacing: at 10/100s three callers get the
// starts 0, 10 and 20 s; the middle one gives its slot back (it will not
// use it). A give-back cannot say which slot it frees, so it frees none:
// the next caller starts at 30 s, not at 20 s beside the last holder, and
// every start stays a slot apart whatever the order of the give-backs.
func TestLeakyBucketGiveBackKeepsSpacing(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: 100 * time.Second}
	s := runLeaky(t, l, []leakyStep{
		{cost: 1, allowed: true, wait: 0, remaining: 9, reset: 10 * time.Second},
		{cost: 1, allowed: true, wait: 10 * time.Second, remaining: 8, reset: 20 * time.Second},
		{cost: 1, allowed: true, wait: 20 * time.Second, remaining: 7, reset: 30 * time.Second},
		// The middle caller gives back: nothing moves.
		{advance: time.Second, cost: -1, allowed: true, remaining: 7, reset: 29 * time.Second},
		{cost: 1, allowed: true, wait: 29 * time.Second, remaining: 6, reset: 39 * time.Second},
		// A give-back of more than is queued changes nothing either.
		{cost: -10, allowed: true, remaining: 6, reset: 39 * time.Second},
	})
	if s.B != epoch.UnixMilli()+40_000 {
		t.Fatalf("the queue ends at t0+%dms, want t0+40000ms", s.B-epoch.UnixMilli())
	}
}
