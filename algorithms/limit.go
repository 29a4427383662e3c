package algorithms

import (
	"errors"
	"fmt"
	"time"
)

// Bounds on limits. All arithmetic is done in integers (milliseconds and
// scaled token counts) and the Lua twins run on doubles, which hold integers
// exactly only below 2^53; these bounds keep every intermediate value below
// that, with room to spare.
const (
	// MaxScaled bounds requests, requests × period for a window whose
	// requests weigh on the next and burst × (period / gcd(requests,
	// period)) for a bucket, both in milliseconds: about 1.1e15, e.g. a million requests per 13 days.
	MaxScaled = 1 << 50
	// MaxLogRequests caps requests for an algorithm whose state is a log
	// (Facts.Log), whose memory grows with the number of admitted units in a window: one slot a unit,
	// at most Requests slots (80 KB in Go, 60 KB in Redis at this cap).
	MaxLogRequests = 10_000
	// maxWait bounds the longest wait a limit can produce: its period (two
	// periods for a window whose requests weigh on the next) or, for a
	// bucket, the time to refill an empty bucket.
	// About 139 years (2^42 ms), it keeps every Duration in a Decision
	// inside time.Duration's 292 years, even after the clock went back by
	// as much again.
	maxWait = (1 << 42) * time.Millisecond
)

// ErrInvalidLimit is wrapped by every error Validate returns.
var ErrInvalidLimit = errors.New("invalid limit")

// LimitError is the error Validate returns: what is wrong with a Limit,
// and in which field. It wraps ErrInvalidLimit.
type LimitError struct {
	// Field is the field at fault as a config file names it ("requests",
	// "period", "burst", "calendar", "time_zone", "algorithm"), or "" for
	// the limit as a whole.
	Field string
	// Reason says what is wrong with Field, e.g. "must be positive, got
	// 0"; the whole message when Field is "".
	Reason string
	// Only, when not empty, are the algorithms that take Field, which the
	// limit's Algorithm does not; Reason is then empty.
	Only []Algorithm
	// Algorithm is the limit's algorithm.
	Algorithm Algorithm
}

// Error says what is wrong, the field first: "invalid limit: burst
// applies only to A and B, not C", A, B and C the algorithms' names.
func (e *LimitError) Error() string {
	return ErrInvalidLimit.Error() + ": " + e.Message(Algorithm.String)
}

// Message is Error without its "invalid limit: " prefix, the algorithms
// of Only spelled by name.
func (e *LimitError) Message(name func(Algorithm) string) string {
	switch {
	case len(e.Only) > 0:
		return fmt.Sprintf("%s applies only to %s, not %v", e.Field, Names(e.Only, "and", name), e.Algorithm)
	case e.Field == "":
		return e.Reason
	}
	return e.Field + " " + e.Reason
}

// Unwrap returns ErrInvalidLimit.
func (e *LimitError) Unwrap() error { return ErrInvalidLimit }

// Limit is a rate: Requests per Period, counted by Algorithm.
type Limit struct {
	// Algorithm counts the requests. Required.
	Algorithm Algorithm
	// Requests admitted per Period. Must be positive.
	Requests int64
	// Period of the rate, in whole milliseconds. Must be positive.
	Period time.Duration
	// Burst is the capacity of an algorithm that takes one (Facts.Burst):
	// a bucket's, or the queue size of one that waits (the most units that
	// may be queued); 0 means Requests. Must be 0 for the others.
	Burst int64
	// Calendar, when set, makes the window the local calendar period (day,
	// ISO week, month, year) of Location instead of Period, which must
	// then be 0. Only an algorithm that counts in windows (Facts.Window)
	// takes one.
	Calendar Calendar
	// Location is the time zone of a Calendar; nil means UTC. Resolve it
	// once (time.LoadLocation reads the zone database), when the limit is
	// configured. Only a calendar limit takes one.
	Location *time.Location
}

// Capacity is the most a single request may cost: the burst for an
// algorithm that takes one (Facts.Burst) when it is set, Requests
// otherwise. A larger cost can never be admitted.
func (l Limit) Capacity() int64 {
	if l.Burst > 0 {
		if r := rowOf(l.Algorithm); r != nil && r.Burst != "" {
			return l.Burst
		}
	}
	return l.Requests
}

// periodMs is the period in milliseconds.
func (l Limit) periodMs() int64 { return l.Period.Milliseconds() }

// Validate reports what is wrong with l, naming the field: a
// *LimitError, which wraps ErrInvalidLimit. It is the one check of a
// limit, whether it comes from a config file, a request or a program.
// A field the algorithm does not take (a burst, a calendar period) is
// reported first, with LimitError.Only set, so that a config file can
// point at it while the rest of the limit is still being read.
func (l Limit) Validate() error {
	r := rowOf(l.Algorithm)
	bad := func(field, format string, args ...any) error {
		return &LimitError{Field: field, Reason: fmt.Sprintf(format, args...), Algorithm: l.Algorithm}
	}
	cal := l.Calendar != NoCalendar
	switch {
	case r == nil:
		return bad("algorithm", "%v is not one of %s", l.Algorithm, Names(All(), "or", Algorithm.String))
	case l.Burst > 0 && r.Burst == "":
		return &LimitError{Field: "burst", Only: Which(func(f Facts) bool { return f.Burst != "" }), Algorithm: l.Algorithm}
	case l.Calendar.Valid() && !r.Window:
		return &LimitError{Field: "calendar", Only: Which(func(f Facts) bool { return f.Window }), Algorithm: l.Algorithm}
	case l.Location != nil && !cal:
		return bad("time_zone", "%v applies only to a calendar period (day, week, month, year)", l.Location)
	case cal && !l.Calendar.Valid():
		return bad("calendar", "%v is not one of day, week, month, year", l.Calendar)
	case cal && l.Period != 0:
		return bad("period", "must be unset with a calendar period (the %s is the window), got %v", l.Calendar, l.Period)
	case l.Requests <= 0:
		return bad("requests", "must be positive, got %d", l.Requests)
	case !cal && l.Period <= 0:
		return bad("period", "must be positive, got %v", l.Period)
	case l.Period%time.Millisecond != 0:
		return bad("period", "must be a whole number of milliseconds, got %v", l.Period)
	case l.Burst < 0:
		return bad("burst", "must not be negative, got %d", l.Burst)
	case l.Requests > MaxScaled:
		return bad("requests", "%d exceeds 2^50", l.Requests)
	case l.periodMs() > maxWait.Milliseconds():
		return bad("period", "%v exceeds the longest wait, %v", l.Period, maxWait)
	}
	return r.validate(l)
}

// invalid is a *LimitError about l as a whole (Field "").
func invalid(l Limit, format string, args ...any) error {
	return &LimitError{Reason: fmt.Sprintf(format, args...), Algorithm: l.Algorithm}
}

// validateBucket is Validate's check of a bucket's numbers, in scaled
// units (Scale; for one that waits, a queue slot is scale units, a
// millisecond perMs). what names the burst in the message.
func validateBucket(what string) func(Limit) error {
	return func(l Limit) error {
		perMs, scale := tokenScale(l.Requests, l.periodMs())
		c := l.Capacity()
		if c > MaxScaled/scale {
			return invalid(l, "%s %d with %d requests per %v is too fine-grained to count exactly (burst × period_ms / gcd(requests, period_ms) must be at most 2^50)", what, c, l.Requests, l.Period)
		}
		if ceilDiv(c*scale, perMs) > maxWait.Milliseconds() {
			return invalid(l, "%s %d at %d requests per %v takes longer than %v to drain or refill (burst × period / requests)", what, c, l.Requests, l.Period, maxWait)
		}
		return nil
	}
}

// Decision is the answer to one check.
type Decision struct {
	// Allowed reports whether the whole cost was admitted. A peek (cost 0)
	// and a refund (cost < 0) are always allowed.
	Allowed bool
	// Limit is the capacity that applied (Limit.Capacity).
	Limit int64
	// Remaining is how many whole units could still be spent now, after
	// this decision.
	Remaining int64
	// RetryAfter is 0 when allowed; otherwise the exact wait until the same
	// cost would be admitted, assuming nothing else is spent meanwhile.
	// Negative means never: the cost exceeds the capacity.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full limit.
	ResetAfter time.Duration
	// Wait is how long an admitted request must wait before it may start:
	// the answer of an algorithm that waits (Facts.Waits; its place in the
	// queue). 0 when it may
	// start now, on a deny, and for every other algorithm. A peek (cost 0)
	// reports the wait a request would get.
	Wait time.Duration
	// Debt is how many units the key owes after a decision in Debt mode
	// (Debt mode): how far its count stands above the limit. Always 0
	// otherwise.
	Debt int64
	// Unrecorded is the part of a Debt-mode cost that was not recorded
	// because the key's debt reached its bound (see Debt). Always 0
	// otherwise.
	Unrecorded int64
	// TTL is how long the new state must be kept. Zero means the state is
	// equivalent to no state at all and may be dropped.
	TTL time.Duration
}

// Never is the RetryAfter of a cost that can never be admitted.
const Never time.Duration = -1

// State is the stored state of one key, for every algorithm. The zero value
// is a key never seen (a full limit). It is owned by whoever stores it (a
// store, or an embedding service): callers keep it and hand it back, and
// never read or build its fields; their meaning may change between
// releases. The package doc says what each algorithm keeps in it.
type State struct {
	A, B, C int64
	Log     []int64
}

// Decide charges cost against l for a key in state s at time now and
// returns the new state and the decision. cost > 0 spends, cost == 0 only
// looks, cost < 0 gives units back (a refund; never above the capacity).
// When the decision is a deny, or cost is 0, the returned state is
// equivalent to s and need not be written.
//
// l must be valid (Validate). Time may go backwards: a now before the
// state's newest time is treated as that time.
func Decide(l Limit, s State, now time.Time, cost int64) (State, Decision) {
	return decide(l, s, ask{now: now.UnixMilli(), cost: cost})
}

// ms converts milliseconds to a Duration.
func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// ceilDiv is ⌈a/b⌉ for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// floorDiv is ⌊a/b⌋ for any a, b > 0.
func floorDiv(a, b int64) int64 {
	if a >= 0 {
		return a / b
	}
	return -ceilDiv(-a, b)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
