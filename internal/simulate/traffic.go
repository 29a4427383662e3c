// Package simulate runs a pattern of requests, one unit each, through
// floodgate's algorithms on a virtual clock and draws what they admitted
// and denied, as a text timeline and an SVG chart; the same input always
// gives the same bytes. Time 0 is a window edge of the limit, so "55s"
// under a 10/1m limit is five seconds before the first edge.
package simulate

import (
	"fmt"
	"slices"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// MaxRequests bounds the requests in one traffic pattern, so that a typo
// such as steady:1000/1ms for 1h fails at once rather than filling memory.
const MaxRequests = 100_000

// MaxSpan bounds how long a simulation may run.
const MaxSpan = 366 * 24 * time.Hour

// Segment is one part of a traffic pattern: when its requests arrive and
// when it ends. Make one with [Steady], [Burst] or [Edge].
type Segment struct {
	// Arrivals are the times the requests arrive, in whole milliseconds
	// from the start, in order; several may share a time.
	Arrivals []time.Duration
	// End is when the segment is over (after its last arrival).
	End time.Duration
}

// Steady sends requests per period, evenly spaced, from at for length:
// request i arrives at at + ⌊i·period/requests⌋ ms while that is before
// at + length. Steady(2, time.Second, 0, time.Minute) is 120 requests,
// one every 500ms.
func Steady(requests int64, period, at, length time.Duration) (Segment, error) {
	switch {
	case requests <= 0:
		return Segment{}, fmt.Errorf("a steady rate needs a positive number of requests, got %d", requests)
	case period < time.Millisecond:
		return Segment{}, fmt.Errorf("a steady rate needs a period of at least 1ms, got %v", period)
	case length <= 0:
		return Segment{}, fmt.Errorf("a steady rate needs a positive length, got %v", length)
	}
	if err := checkTime("start", at); err != nil {
		return Segment{}, err
	}
	if err := checkTime("length", length); err != nil {
		return Segment{}, err
	}
	p, lenMs := period.Milliseconds(), length.Milliseconds()
	// ⌈length·requests/period⌉ arrivals, computed without overflow.
	if requests > MaxRequests || lenMs/p > MaxRequests/requests {
		return Segment{}, fmt.Errorf("%d per %v for %v is more than %d requests", requests, period, length, MaxRequests)
	}
	var s Segment
	for i := int64(0); ; i++ {
		off := i/requests*p + i%requests*p/requests
		if off >= lenMs {
			break
		}
		s.Arrivals = append(s.Arrivals, at+time.Duration(off)*time.Millisecond)
	}
	if len(s.Arrivals) > MaxRequests {
		return Segment{}, fmt.Errorf("%d per %v for %v is more than %d requests", requests, period, length, MaxRequests)
	}
	s.End = at + length
	return s, nil
}

// Burst sends n requests at the same instant, at.
func Burst(n int64, at time.Duration) (Segment, error) {
	if n <= 0 || n > MaxRequests {
		return Segment{}, fmt.Errorf("a burst needs between 1 and %d requests, got %d", MaxRequests, n)
	}
	if err := checkTime("time", at); err != nil {
		return Segment{}, err
	}
	return Segment{Arrivals: slices.Repeat([]time.Duration{at}, int(n)), End: at + time.Millisecond}, nil
}

// edgeGap is how long before a window edge the window-edge attack sends
// its first burst: a sixtieth of the period (1s for a 1m window), at least
// 1ms.
func edgeGap(period time.Duration) time.Duration {
	return max(time.Millisecond, (period / 60).Truncate(time.Millisecond))
}

// Edge is the window-edge attack: a client sends
// the limit's full Requests edgeGap(period) before the window edge at
// edge, and Requests again at the edge, hoping for twice the limit within
// a moment. edge must be a positive multiple of l's period, and the
// period at least 2ms (in a 1ms window, "just before the edge" is the
// edge before).
func Edge(l algorithms.Limit, edge time.Duration) (Segment, error) {
	if l.Period < 2*time.Millisecond {
		return Segment{}, fmt.Errorf("the window-edge attack needs a period of at least 2ms, got %v", l.Period)
	}
	if edge <= 0 || edge%l.Period != 0 {
		return Segment{}, fmt.Errorf("the window-edge attack needs a window edge, a positive multiple of the period %v, got %v", l.Period, edge)
	}
	before, err := Burst(l.Requests, edge-edgeGap(l.Period))
	if err != nil {
		return Segment{}, err
	}
	after, err := Burst(l.Requests, edge)
	if err != nil {
		return Segment{}, err
	}
	return Segment{Arrivals: append(before.Arrivals, after.Arrivals...), End: after.End}, nil
}

// checkTime rejects a negative or sub-millisecond time, or one past
// MaxSpan, naming what it is.
func checkTime(what string, d time.Duration) error {
	switch {
	case d < 0:
		return fmt.Errorf("the %s must not be negative, got %v", what, d)
	case d%time.Millisecond != 0:
		return fmt.Errorf("the %s must be a whole number of milliseconds, got %v", what, d)
	case d > MaxSpan:
		return fmt.Errorf("the %s must be at most %v, got %v", what, MaxSpan, d)
	}
	return nil
}

// Traffic is a whole pattern: every request's arrival, in order, and how
// long the simulation runs.
type Traffic struct {
	// Arrivals are in whole milliseconds from the start, in order.
	Arrivals []time.Duration
	// Span is how long the simulation runs: the latest segment end,
	// rounded up to a whole number of periods.
	Span time.Duration
}

// Join merges segments into one pattern for a limit of the given period
// (which rounds the span up). Segments may overlap; their requests are
// merged in time order.
func Join(period time.Duration, segments ...Segment) (Traffic, error) {
	if period < time.Millisecond {
		return Traffic{}, fmt.Errorf("the period must be at least 1ms, got %v", period)
	}
	var t Traffic
	var end time.Duration
	for _, s := range segments {
		if len(t.Arrivals)+len(s.Arrivals) > MaxRequests {
			return Traffic{}, fmt.Errorf("more than %d requests in all", MaxRequests)
		}
		t.Arrivals = append(t.Arrivals, s.Arrivals...)
		end = max(end, s.End)
	}
	if len(t.Arrivals) == 0 {
		return Traffic{}, fmt.Errorf("no requests")
	}
	slices.Sort(t.Arrivals)
	t.Span = (end + period - 1) / period * period
	if t.Span > MaxSpan {
		return Traffic{}, fmt.Errorf("it runs for %v, longer than %v", t.Span, MaxSpan)
	}
	return t, nil
}
