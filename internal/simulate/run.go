package simulate

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// epochMs is where the virtual clock starts, in Unix ms, before it moves on
// to the next window edge: 2000-01-01 UTC, the fixed epoch of the
// algorithms' tests.
const epochMs = 946_684_800_000

// Request is one simulated request and its decision.
type Request struct {
	// At is when it arrived, from the start.
	At time.Duration
	// Allowed reports whether the algorithm admitted it.
	Allowed bool
	// Wait is how long an admitted request waited in the queue of an
	// algorithm that waits. Charts count admitted requests at their Start.
	Wait time.Duration
}

// Start is when q starts: its arrival plus its wait.
func (q Request) Start() time.Duration { return q.At + q.Wait }

// Result is what a limit made of a traffic pattern.
type Result struct {
	// Limit is the limit the requests ran against.
	Limit algorithms.Limit
	// Requests are every request with its decision, in arrival order.
	Requests []Request
	// Span is how long the simulation ran: Traffic.Span, or for a leaky
	// bucket long enough for the last start, rounded up to a period.
	Span time.Duration
	// Admitted and Denied count the decisions.
	Admitted, Denied int
}

// Run sends every request of t, in order and at a cost of one unit, to one
// key under l, deciding each with the algorithms package on a virtual clock
// that starts at a window edge of l. l must be valid.
func Run(l algorithms.Limit, t Traffic) (Result, error) {
	if err := l.Validate(); err != nil {
		return Result{}, err
	}
	if t.Span <= 0 || len(t.Arrivals) > 0 && t.Arrivals[len(t.Arrivals)-1] >= t.Span {
		return Result{}, fmt.Errorf("the span %v must be positive and end after the last arrival", t.Span)
	}
	p := l.Period.Milliseconds()
	start := (epochMs + p - 1) / p * p // the first window edge at or after epoch
	r := Result{Limit: l, Span: t.Span, Requests: make([]Request, len(t.Arrivals))}
	var state algorithms.State // a key never seen: a full limit
	for i, at := range t.Arrivals {
		if at < 0 || at%time.Millisecond != 0 || i > 0 && at < t.Arrivals[i-1] {
			return Result{}, fmt.Errorf("arrival %d at %v is not a whole, non-negative number of milliseconds in order", i, at)
		}
		// Apply: the simulation owns its state, so a state that is a log
		// costs O(1) a request rather than a copy of its ring.
		d := algorithms.Apply(l, &state, algorithms.Request{NowMs: start + at.Milliseconds(), Cost: 1}, nil)
		r.Requests[i] = Request{At: at, Allowed: d.Allowed, Wait: d.Wait}
		if d.Allowed {
			r.Admitted++
		} else {
			r.Denied++
		}
		if end := at + d.Wait; end >= r.Span {
			// A start after the traffic: run to the period after it.
			r.Span = (end/l.Period + 1) * l.Period
		}
	}
	return r, nil
}

// Step is one step of [Result.Trailing]: from At until the next step, Count
// requests were admitted in the trailing period.
type Step struct {
	At    time.Duration
	Count int
}

// Trailing is the number of admitted requests that started in the last
// period, (t − period, t], as a step function over [0, Span) from 0: the
// figure a limit promises to bound.
func (r Result) Trailing() []Step {
	w := r.Limit.Period
	var admits []time.Duration
	for _, q := range r.Requests {
		if q.Allowed {
			admits = append(admits, q.Start()) // in order: a later arrival never starts earlier
		}
	}
	steps := []Step{{At: 0}}
	count := 0
	in, out := 0, 0 // next admit to enter the window, next to leave it
	for in < len(admits) || out < len(admits) {
		// The next event: an admit entering at its time, or leaving at
		// its time + w (leaving first when both fall at once).
		var at time.Duration
		if out < len(admits) && (in == len(admits) || admits[out]+w <= admits[in]) {
			at = admits[out] + w
			for out < len(admits) && admits[out]+w == at {
				out++
				count--
			}
		} else {
			at = admits[in]
			for in < len(admits) && admits[in] == at {
				in++
				count++
			}
		}
		if at >= r.Span {
			break
		}
		if last := &steps[len(steps)-1]; last.At == at {
			last.Count = count
		} else {
			steps = append(steps, Step{At: at, Count: count})
		}
	}
	return steps
}

// Busiest is the most requests admitted in any one period, (t − period,
// t], and the first t where that happened.
func (r Result) Busiest() (count int, at time.Duration) {
	for _, s := range r.Trailing() {
		if s.Count > count {
			count, at = s.Count, s.At
		}
	}
	return count, at
}

// LongestWait is the longest an admitted request waited for its start (in
// the queue of an algorithm that waits); 0 for the other algorithms.
func (r Result) LongestWait() time.Duration {
	var w time.Duration
	for _, q := range r.Requests {
		w = max(w, q.Wait)
	}
	return w
}
