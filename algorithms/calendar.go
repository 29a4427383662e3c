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

// calendarNames are the calendar periods' names, by value ("" for
// NoCalendar).
var calendarNames = [...]string{Day: "day", Week: "week", Month: "month", Year: "year"}

// String returns the calendar's name, e.g. "month"; "" for NoCalendar.
func (c Calendar) String() string {
	if int(c) < len(calendarNames) {
		return calendarNames[c]
	}
	return fmt.Sprintf("calendar(%d)", uint8(c))
}

// Valid reports whether c is one of the four calendar periods.
func (c Calendar) Valid() bool { return c != NoCalendar && int(c) < len(calendarNames) }

// ParseCalendar reads a calendar name: "day", "week", "month" or "year".
func ParseCalendar(name string) (Calendar, error) {
	for c, n := range calendarNames {
		if n == name && n != "" {
			return Calendar(c), nil
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
// period) is out of range (calendarSkew). The state's window (State.A,
// the fixed window's end, the sliding window's start) must equal a
// boundary to count, as the row's calendar decision says; any other, e.g.
// one written under a fixed period or another time zone, counts as an
// empty window (the limit changed).
//
// In Debt mode (a.mode), a positive cost is charged even when it does not
// fit, up to 2 × Requests in the period (see Debt), and the debt is not
// carried past the period's end: a calendar quota is a billing period,
// whose count starts from 0 at the next boundary.
func decideCalendar(l Limit, s State, b Bounds, a ask) (State, Decision) {
	if c := l.Capacity(); a.cost > c && !a.debt() {
		_, d := decideCalendar(l, s, b, ask{now: a.now, mode: a.mode})
		d.Allowed, d.RetryAfter = false, Never
		return s, d
	} else if a.cost < -c {
		a.cost = -c
	}
	r := rowOf(l.Algorithm)
	switch {
	case r == nil || r.calendar == nil:
		return s, Decision{Limit: l.Capacity(), RetryAfter: Never}
	case a.now >= b[3]:
		return s, calendarSkew(l, b, a)
	}
	return r.calendar(l, s, b, a)
}

// period is the index i of the period [b[i], b[i+1]) a decision at now
// is made in (decideCalendar): 1, or 2 for a now past b[2].
func (b Bounds) period(now int64) int {
	if now >= b[2] {
		return 2
	}
	return 1
}

// calendarSkew is the decision at a now out of the range of b (a clock
// more than a period ahead of the one that computed b): every positive
// cost is denied with RetryAfter 1s and Remaining 0, and peeks and
// refunds change nothing (TTL b[4] − b[1], so a rewritten state outlives
// the periods it may belong to): never more than the limit is admitted in
// any period. A debt charge records nothing and reports it all
// Unrecorded.
func calendarSkew(l Limit, b Bounds, a ask) Decision {
	d := Decision{Allowed: a.cost <= 0, Limit: l.Requests, ResetAfter: ms(skewRetryMs), TTL: ms(b[4] - b[1])}
	switch {
	case a.debt() && a.cost > 0:
		d.Allowed, d.Unrecorded = true, a.cost
	case a.cost > 0:
		d.RetryAfter = ms(skewRetryMs)
	}
	return d
}
