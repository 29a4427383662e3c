package algorithms

import (
	"fmt"
	"time"
)

// Calendar names a calendar period: a limit whose window is the local day,
// ISO week (from Monday), month or year of a time zone, rather than a
// fixed number of milliseconds from the Unix epoch. The numbers match
// floodgate.v1's Calendar enum.
type Calendar uint8

// The calendar periods. NoCalendar (the zero value) is a fixed Period.
const (
	NoCalendar Calendar = 0
	Day        Calendar = 1
	Week       Calendar = 2
	Month      Calendar = 3
	Year       Calendar = 4
)

var calendarNames = map[Calendar]string{Day: "day", Week: "week", Month: "month", Year: "year"}

// String returns the calendar's name, e.g. "month"; "" for NoCalendar.
func (c Calendar) String() string {
	if c == NoCalendar {
		return ""
	}
	if n, ok := calendarNames[c]; ok {
		return n
	}
	return fmt.Sprintf("calendar(%d)", uint8(c))
}

// Valid reports whether c is one of the four calendar periods.
func (c Calendar) Valid() bool {
	_, ok := calendarNames[c]
	return ok
}

// ParseCalendar reads a calendar name: "day", "week", "month" or "year".
func ParseCalendar(name string) (Calendar, error) {
	for c, n := range calendarNames {
		if n == name {
			return c, nil
		}
	}
	return NoCalendar, fmt.Errorf("unknown calendar period %q (want day, week, month or year)", name)
}

// maxLength is the longest period of c: a day of 25 hours (the day a
// daylight-saving clock goes back), a week and a 31-day month with such a
// day, a leap year with one. Validate bounds requests × maxLength for a
// window whose requests weigh on the next with it (as requests × period for a fixed period); the
// 8× headroom between MaxScaled and 2^53 covers the odd historical
// period up to twice as long (a zone that moved across the date line).
func (c Calendar) maxLength() time.Duration {
	switch c {
	case Day:
		return 25 * time.Hour
	case Week:
		return 7*24*time.Hour + time.Hour
	case Month:
		return 31*24*time.Hour + time.Hour
	case Year:
		return 366*24*time.Hour + time.Hour
	}
	return 0
}

// Bounds are five consecutive period boundaries in Unix ms, strictly
// increasing: [Bounds[1], Bounds[2]) is the period containing the time
// they were computed for, Bounds[0] the start of the one before it,
// Bounds[3] and Bounds[4] the ends of the two after it. A decision needs
// the previous period's start (the previous count of a window that is not
// afresh), the
// current period, and the next period's end (the waits that cross into
// it); the one after that is there for a Redis clock just past Bounds[2]
// (decideCalendar).
type Bounds [5]int64

// Bounds computes the boundaries around nowMs for c in loc (nil means
// UTC). Each boundary is the first instant of the period's first local
// day (dayStart: local midnight, or the instant the clocks jump where they
// skip it). Pure: the clock is passed in. c must be Valid.
func (c Calendar) Bounds(loc *time.Location, nowMs int64) Bounds {
	if loc == nil {
		loc = time.UTC
	}
	t := time.UnixMilli(nowMs).In(loc)
	y, m, d := t.Date()
	if c == Week {
		d -= (int(t.Weekday()) + 6) % 7 // back to Monday
	}
	// start(k) is the start of the k-th period after the one of t.
	start := func(k int) int64 {
		switch c {
		case Day:
			return dayStart(y, m, d+k, loc)
		case Week:
			return dayStart(y, m, d+7*k, loc)
		case Month:
			return dayStart(y, m+time.Month(k), 1, loc)
		}
		return dayStart(y+k, 1, 1, loc)
	}
	// k0 is the period containing now; step until start(k0) <= now <
	// start(k0+1), whatever a zone did to its dates.
	var b Bounds
	k0 := 0
	b[1], b[2] = start(0), start(1)
	for b[1] > nowMs {
		k0--
		b[1], b[2] = start(k0), b[1]
	}
	for b[2] <= nowMs {
		k0++
		b[1], b[2] = b[2], start(k0+1)
	}
	// Neighbours, skipping any period of no length (a day a zone skipped).
	for k := k0 - 1; ; k-- {
		if b[0] = start(k); b[0] < b[1] {
			break
		}
	}
	k := k0 + 1
	for i := 3; i < 5; i++ {
		for {
			k++
			if b[i] = start(k); b[i] > b[i-1] {
				break
			}
		}
	}
	return b
}

// dayStart is the first instant (Unix ms) of the local date y-m-d in loc
// (normalised, so d may overflow the month). That is local midnight, the
// earlier one where it happens twice (a clock set back at 01:00 to
// 00:00), and the instant the clocks jump where they skip midnight (from
// 00:00 to 01:00: the day starts at 01:00). time.Date alone resolves such
// times either way (it may return 23:00 the day before), so the
// candidates are checked against the zone's offsets around it. A date the
// zone skipped entirely starts where the next one does.
func dayStart(y int, m time.Month, d int, loc *time.Location) int64 {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	wall := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // the local midnight's wall clock, as UTC
	// The common case: t is that midnight, and the offset did not change
	// in the 3 hours before it (so it is not a second midnight).
	if _, off := t.Zone(); t.Unix() == wall.Unix()-int64(off) {
		if _, before := t.Add(-3 * time.Hour).Zone(); before == off {
			return t.UnixMilli()
		}
	}
	sameDate := func(u time.Time) bool {
		uy, um, ud := u.In(loc).Date()
		wy, wm, wd := wall.Date()
		return uy == wy && um == wm && ud == wd
	}
	// The offsets in force around t: at t, before its zone period, after it.
	at := []time.Time{t}
	if zs, ze := t.ZoneBounds(); !zs.IsZero() || !ze.IsZero() {
		if !zs.IsZero() {
			at = append(at, zs.Add(-time.Second), zs)
		}
		if !ze.IsZero() {
			at = append(at, ze)
		}
	}
	best := int64(0)
	found := false
	for _, u := range at {
		_, off := u.In(loc).Zone()
		cand := wall.Add(-time.Duration(off) * time.Second)
		if l := cand.In(loc); sameDate(cand) && l.Hour() == 0 && l.Minute() == 0 && l.Second() == 0 {
			if ms := cand.UnixMilli(); !found || ms < best {
				best, found = ms, true
			}
		}
	}
	if found {
		return best
	}
	// Midnight does not exist: the day starts at the transition into it,
	// the first instant of its date among the candidates.
	for _, u := range at {
		if sameDate(u) && !sameDate(u.Add(-time.Millisecond)) {
			return u.UnixMilli()
		}
	}
	return t.UnixMilli() // a skipped date: Bounds steps over it
}

// Out-of-range decisions (decideCalendar): a now at or past Bounds[3]
// means the boundaries were computed by a clock more than a whole period
// behind the one deciding (floodgate's against Redis' TIME); the decision
// then denies every charge and asks to retry after skewRetryMs.
const skewRetryMs = 1000

// decideCalendar is the decision for a calendar limit (l.Calendar set) with
// the boundaries b given rather than computed from a.now: the Redis store
// computes them from floodgate's clock and hands them to the script,
// which decides at Redis' clock (Request.Bounds); otherwise it is called
// with l.Calendar.Bounds(l.Location, a.now), where a.now lies in [b[1], b[2]).
//
// The period decided is the one containing now among b: [b[1], b[2]) for
// a now before b[2] (a now before b[1], a deciding clock behind the one
// that computed b, is decided at b[1], like a clock that went back), or
// [b[2], b[3]) for a now past b[2] (a deciding clock just past the
// boundary). A now at or past b[3] (the clocks disagree by more than a
// period) is out of range: every positive cost is denied with RetryAfter
// 1s and Remaining 0, and peeks and refunds change nothing (TTL b[4] −
// b[1], so a rewritten state outlives the periods it may belong to):
// never more than the limit is admitted in any period.
//
// The state's window start (State.A) must equal a boundary to count: for
// a window that starts afresh (Facts.Afresh), the current period's start
// only (each period counts on its own, as fixedCount's windows do); for
// the others, that start, the previous one's (the previous count), or the
// next one's when the deciding period is [b[1], b[2]) (the clock went
// back across the boundary: stay in that window), and a start equal to
// b[3] while deciding [b[2], b[3]) is out of range too. Any other start,
// e.g. one written under a fixed period or another time zone, counts as
// an empty window (the limit changed).
//
// In Debt mode (a.mode), a positive
// cost is charged even when it does not fit, up to 2 × Requests in the
// period (see Debt), and the debt is not carried past the period's end: a
// calendar quota is a billing period, whose count starts from 0 at the
// next boundary (a previous period still weighs on the next one as usual
// where the window is not afresh). A debt charge that cannot be decided (Redis' clock a
// period ahead) records nothing and reports it all Unrecorded.
func decideCalendar(l Limit, s State, b Bounds, a ask) (State, Decision) {
	debt := a.debt() && a.cost > 0
	if c := l.Capacity(); a.cost > c && !debt {
		_, d := decideCalendar(l, s, b, ask{now: a.now, mode: a.mode})
		d.Allowed, d.RetryAfter = false, Never
		return s, d
	} else if a.cost < -c {
		a.cost = -c
	}
	nowMs, cost := a.now, a.cost
	i := 1
	if nowMs >= b[2] {
		i = 2
	}
	afresh := true
	if r := rowOf(l.Algorithm); r != nil {
		afresh = r.Afresh
	}
	if nowMs >= b[3] || (i == 2 && s.A == b[3] && !afresh) {
		d := Decision{Allowed: cost <= 0, Limit: l.Requests, ResetAfter: ms(skewRetryMs), TTL: ms(b[4] - b[1])}
		switch {
		case debt:
			d.Allowed, d.Unrecorded = true, cost
		case cost > 0:
			d.RetryAfter = ms(skewRetryMs)
		}
		return s, d
	}
	prev, start, end, next := b[i-1], b[i], b[i+1], b[i+2]
	after := int64(0) // the end of the period after next: known for i == 1
	if i == 1 {
		after = b[4]
	}
	if !afresh { // the previous period weighs on this one
		var curr, last int64
		switch s.A {
		case start:
			curr, last = s.B, s.C
		case prev:
			// The previous period weighs with at most its quota: a debt
			// does not roll over (decideCalendar).
			last = min(s.B, l.Requests)
		case end: // the clock went back across the boundary (i == 1 only, above)
			start, end, next = end, next, after
			curr, last = s.B, s.C
		}
		return slidingDecide(s, slidingSpan{start: start, w: end - start, w2: next - end}, slidingTally{requests: l.Requests, curr: curr, prev: last}, a)
	}
	count := int64(0)
	if s.A == start { // each period counts on its own (fixedCount)
		count = min(s.B, 2*l.Requests)
	}
	return fixedDecide(l, s, fixedSpan{start: start, end: end, count: count}, a)
}
