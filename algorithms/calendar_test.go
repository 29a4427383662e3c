package algorithms

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func TestCalendarBounds(t *testing.T) {
	jakarta, ny, berlin := mustZone(t, "Asia/Jakarta"), mustZone(t, "America/New_York"), mustZone(t, "Europe/Berlin")
	at := func(loc *time.Location, y int, m time.Month, d, h, min int) int64 {
		return time.Date(y, m, d, h, min, 0, 0, loc).UnixMilli()
	}
	day := func(loc *time.Location, y int, m time.Month, d int) int64 { return at(loc, y, m, d, 0, 0) }
	for _, tc := range []struct {
		name string
		cal  Calendar
		loc  *time.Location
		now  int64
		want Bounds
	}{
		{"month end in Jakarta", Month, jakarta, at(jakarta, 2027, 1, 31, 23, 59),
			Bounds{day(jakarta, 2026, 12, 1), day(jakarta, 2027, 1, 1), day(jakarta, 2027, 2, 1), day(jakarta, 2027, 3, 1), day(jakarta, 2027, 4, 1)}},
		{"Feb 1 in Jakarta is Jan 31 in UTC", Month, jakarta, at(time.UTC, 2027, 1, 31, 17, 0),
			Bounds{day(jakarta, 2027, 1, 1), day(jakarta, 2027, 2, 1), day(jakarta, 2027, 3, 1), day(jakarta, 2027, 4, 1), day(jakarta, 2027, 5, 1)}},
		{"leap day", Day, time.UTC, at(time.UTC, 2028, 2, 29, 12, 0),
			Bounds{day(time.UTC, 2028, 2, 28), day(time.UTC, 2028, 2, 29), day(time.UTC, 2028, 3, 1), day(time.UTC, 2028, 3, 2), day(time.UTC, 2028, 3, 3)}},
		{"leap February", Month, time.UTC, at(time.UTC, 2028, 2, 29, 23, 59),
			Bounds{day(time.UTC, 2028, 1, 1), day(time.UTC, 2028, 2, 1), day(time.UTC, 2028, 3, 1), day(time.UTC, 2028, 4, 1), day(time.UTC, 2028, 5, 1)}},
		{"ISO week from Monday, on a Sunday", Week, time.UTC, at(time.UTC, 2026, 11, 29, 23, 0),
			Bounds{day(time.UTC, 2026, 11, 16), day(time.UTC, 2026, 11, 23), day(time.UTC, 2026, 11, 30), day(time.UTC, 2026, 12, 7), day(time.UTC, 2026, 12, 14)}},
		{"ISO week, on its Monday", Week, time.UTC, at(time.UTC, 2026, 11, 30, 0, 0),
			Bounds{day(time.UTC, 2026, 11, 23), day(time.UTC, 2026, 11, 30), day(time.UTC, 2026, 12, 7), day(time.UTC, 2026, 12, 14), day(time.UTC, 2026, 12, 21)}},
		{"year end", Year, berlin, at(berlin, 2026, 12, 31, 23, 59),
			Bounds{day(berlin, 2025, 1, 1), day(berlin, 2026, 1, 1), day(berlin, 2027, 1, 1), day(berlin, 2028, 1, 1), day(berlin, 2029, 1, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cal.Bounds(tc.loc, tc.now); got != tc.want {
				t.Errorf("Bounds = %v, want %v", got, tc.want)
			}
		})
	}
	// Daylight saving: the days the clocks go forward and back are 23 and
	// 25 hours long.
	for _, tc := range []struct {
		loc       *time.Location
		y         int
		m         time.Month
		d         int
		wantHours int64
	}{
		{ny, 2027, 3, 14, 23}, {ny, 2027, 11, 7, 25}, {berlin, 2027, 3, 28, 23}, {berlin, 2027, 10, 31, 25},
	} {
		b := Day.Bounds(tc.loc, at(tc.loc, tc.y, tc.m, tc.d, 12, 0))
		if got := (b[2] - b[1]) / 3_600_000; got != tc.wantHours || b[1] != day(tc.loc, tc.y, tc.m, tc.d) {
			t.Errorf("%v %d-%d-%d: %d-hour day from %d, want %d hours from local midnight", tc.loc, tc.y, tc.m, tc.d, got, b[1], tc.wantHours)
		}
	}
}

// A zone that skipped a whole day (Samoa, 2011-12-30) gives no empty
// period, and every boundary holds now where it should.
func TestCalendarBoundsSkippedDay(t *testing.T) {
	apia := mustZone(t, "Pacific/Apia")
	now := time.Date(2011, 12, 29, 12, 0, 0, 0, apia).UnixMilli()
	b := Day.Bounds(apia, now)
	for i := 1; i < len(b); i++ {
		if b[i] <= b[i-1] {
			t.Fatalf("Bounds %v not strictly increasing", b)
		}
	}
	if !(b[1] <= now && now < b[2]) {
		t.Fatalf("now %d outside [%d, %d)", now, b[1], b[2])
	}
	if next := time.UnixMilli(b[2]).In(apia); next.Day() != 31 {
		t.Errorf("the day after Dec 29 starts %v, want Dec 31", next)
	}
}

func TestCalendarValidate(t *testing.T) {
	jakarta := mustZone(t, "Asia/Jakarta")
	for _, tc := range []struct {
		l    Limit
		want string // "" for valid
	}{
		{Limit{Algorithm: FixedWindow, Requests: 10000, Calendar: Month, Location: jakarta}, ""},
		{Limit{Algorithm: SlidingWindow, Requests: 400_000, Calendar: Month}, ""},
		{Limit{Algorithm: FixedWindow, Requests: 1 << 40, Calendar: Year}, ""},
		{Limit{Algorithm: TokenBucket, Requests: 10, Calendar: Day}, "not token_bucket"},
		{Limit{Algorithm: SlidingWindowLog, Requests: 10, Calendar: Day}, "not sliding_window_log"},
		{Limit{Algorithm: FixedWindow, Requests: 10, Period: time.Hour, Calendar: Day}, "period must be unset"},
		{Limit{Algorithm: FixedWindow, Requests: 10, Period: time.Hour, Location: jakarta}, "applies only to a calendar"},
		{Limit{Algorithm: FixedWindow, Requests: 10, Calendar: 9}, "not one of day"},
		{Limit{Algorithm: FixedWindow, Requests: 0, Calendar: Day}, "requests must be positive"},
		{Limit{Algorithm: SlidingWindow, Requests: 50_000, Calendar: Year}, "exceeds 35"},
		{Limit{Algorithm: FixedWindow, Requests: MaxScaled + 1, Calendar: Year}, "exceeds 2^50"},
	} {
		err := tc.l.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.l, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidLimit)):
			t.Errorf("%+v: err %v, want one containing %q", tc.l, err, tc.want)
		}
	}
}

// A monthly quota in Jakarta: the window is the local month, whatever its
// length, and ResetAfter/RetryAfter point at the next local midnight of
// the 1st.
func TestCalendarFixedMonth(t *testing.T) {
	jakarta := mustZone(t, "Asia/Jakarta")
	l := Limit{Algorithm: FixedWindow, Requests: 3, Calendar: Month, Location: jakarta}
	feb1 := time.Date(2027, 2, 1, 0, 0, 0, 0, jakarta).UnixMilli()
	now := feb1 - 60_000 // Jan 31, 23:59 in Jakarta
	var s State
	for range 3 {
		var d Decision
		if s, d = DecideAt(l, s, Request{NowMs: now, Cost: 1}); !d.Allowed {
			t.Fatalf("denied %+v", d)
		}
	}
	_, d := DecideAt(l, s, Request{NowMs: now, Cost: 1})
	if d.Allowed || d.RetryAfter != time.Minute || d.ResetAfter != time.Minute {
		t.Fatalf("4th in January: %+v, want a deny until Feb 1 in Jakarta, 1m", d)
	}
	s2, d := DecideAt(l, s, Request{NowMs: feb1, Cost: 3})
	if !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Feb 1: %+v, want the whole new month", d)
	}
	mar1 := time.Date(2027, 3, 1, 0, 0, 0, 0, jakarta).UnixMilli()
	if _, d = DecideAt(l, s2, Request{NowMs: feb1, Cost: 1}); d.RetryAfter != ms(mar1-feb1) || d.RetryAfter != 28*24*time.Hour {
		t.Fatalf("RetryAfter %v, want 28 days (February)", d.RetryAfter)
	}
}

// The sliding window over calendar days of 23 and 25 hours: the previous
// day weighs by the fraction of the current day to come, with the
// current day's length.
func TestCalendarSlidingDST(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	l := Limit{Algorithm: SlidingWindow, Requests: 100, Calendar: Day, Location: ny}
	for _, tc := range []struct {
		day   int // in March (spring forward, 23 h) or November (fall back, 25 h) 2027
		m     time.Month
		hours int64
	}{{14, time.March, 23}, {7, time.November, 25}} {
		start := time.Date(2027, tc.m, tc.day, 0, 0, 0, 0, ny).UnixMilli()
		var s State
		s, _ = DecideAt(l, s, Request{NowMs: start - 1, Cost: 100}) // the whole previous day, spent in its last ms
		w := tc.hours * 3_600_000
		// At x ms into the day, prev weighs 100·(w−x)/w: at w/2, 50 fit.
		half := start + w/2
		_, d := DecideAt(l, s, Request{NowMs: half, Cost: 0})
		if d.Remaining != 50 {
			t.Errorf("%v: Remaining %d halfway through a %d-hour day, want 50", tc.m, d.Remaining, tc.hours)
		}
		// 51 fit once prev·(w−e−x) + 51·w <= 100·w, with e = w/2.
		_, d = DecideAt(l, s, Request{NowMs: half, Cost: 51})
		if over := 100*(w-w/2) + 51*w - 100*w; d.Allowed || d.RetryAfter != ms(ceilDiv(over, 100)) {
			t.Errorf("%v: %+v, want a deny for %d ms", tc.m, d, ceilDiv(over, 100))
		}
		if _, d = DecideAt(l, s, Request{NowMs: start, Cost: 1}); d.ResetAfter != ms(w) {
			t.Errorf("%v: ResetAfter %v at the day's start, want %d h", tc.m, d.ResetAfter, tc.hours)
		}
	}
}

// Each wait of the calendar sliding window is exact across periods of
// different lengths: 1 ms less still denies, the wait admits.
func TestCalendarSlidingExactAcrossMonths(t *testing.T) {
	l := Limit{Algorithm: SlidingWindow, Requests: 7, Calendar: Month}
	base := time.Date(2027, 1, 20, 0, 0, 0, 0, time.UTC).UnixMilli()
	var s State
	for step := int64(0); step < 200; step++ {
		now := base + step*step*3_600_000*7/3
		next, d := DecideAt(l, s, Request{NowMs: now, Cost: 1 + step%3})
		if d.Allowed {
			s = next
			continue
		}
		if d.RetryAfter <= 0 {
			t.Fatalf("step %d: deny with RetryAfter %v", step, d.RetryAfter)
		}
		w := d.RetryAfter.Milliseconds()
		if _, d2 := DecideAt(l, s, Request{NowMs: now + w - 1, Cost: 1 + step%3}); d2.Allowed {
			t.Fatalf("step %d at %v: admitted %d ms before RetryAfter %v", step, time.UnixMilli(now).UTC(), 1, d.RetryAfter)
		}
		if _, d2 := DecideAt(l, s, Request{NowMs: now + w, Cost: 1 + step%3}); !d2.Allowed {
			t.Fatalf("step %d at %v: denied at RetryAfter %v: %+v", step, time.UnixMilli(now).UTC(), d.RetryAfter, d2)
		}
	}
}

// The Redis store's boundaries come from floodgate's clock, the decision
// from Redis': a now just past the boundary decides in the next period,
// exactly as bounds computed at that now; a now behind decides at the
// boundaries' start; a now a whole period ahead admits nothing.
func TestDecideCalendarSkew(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		l := Limit{Algorithm: alg, Requests: 5, Calendar: Day, Location: berlin}
		goNow := time.Date(2027, 10, 30, 23, 59, 59, 990_000_000, berlin).UnixMilli()
		b := Day.Bounds(berlin, goNow)
		var s State
		s, _ = DecideAt(l, s, Request{NowMs: goNow - 5000, Cost: 4})
		for _, redisNow := range []int64{b[2], b[2] + 1, b[2] + 3_600_000, b[3] - 1} {
			for _, cost := range []int64{-2, 0, 1, 3, 5, 6} {
				gs, gd := DecideAt(l, s, Request{NowMs: redisNow, Cost: cost})
				rs, rd := DecideAt(l, s, Request{NowMs: redisNow, Cost: cost, Bounds: b})
				if gs.A != rs.A || gs.B != rs.B || gs.C != rs.C || gd != rd {
					t.Errorf("%v at +%d ms cost %d: bounds of Go's now decide %+v %+v, want %+v %+v", alg, redisNow-b[2], cost, rs, rd, gs, gd)
				}
			}
		}
		// Redis behind floodgate: decided at b[1], counts kept in that day.
		behind := b[1] - 10_000
		sb, d := DecideAt(l, State{}, Request{NowMs: behind, Cost: 5, Bounds: b})
		day := b[1] // the state's window: the sliding window's start
		if alg == FixedWindow {
			day = b[2] // the fixed window's end
		}
		if !d.Allowed || sb.A != day {
			t.Fatalf("%v behind: %+v %+v", alg, sb, d)
		}
		if _, d = DecideAt(l, sb, Request{NowMs: b[1] + 1, Cost: 1}); d.Allowed {
			t.Errorf("%v: the day spent while Redis was behind admits more: %+v", alg, d)
		}
		// A whole period ahead: out of range, nothing admitted, nothing lost.
		for _, redisNow := range []int64{b[3], b[4] + 86_400_000} {
			s2, d := DecideAt(l, s, Request{NowMs: redisNow, Cost: 1, Bounds: b})
			if d.Allowed || d.RetryAfter != time.Second || d.Remaining != 0 || s2.A != s.A || s2.B != s.B {
				t.Errorf("%v out of range at %d: %+v %+v", alg, redisNow, s2, d)
			}
			if s2, d = DecideAt(l, s, Request{NowMs: redisNow, Cost: -1, Bounds: b}); !d.Allowed || s2.A != s.A || s2.B != s.B || s2.C != s.C || d.TTL <= 0 {
				t.Errorf("%v out of range refund: %+v %+v, want the state unchanged and kept", alg, s2, d)
			}
		}
	}
}

// A migrating config: a rule's counts written under `period: 30d` (or
// another zone) meet the calendar month. Nothing crashes, the old count
// does not carry, and the new month admits its limit and not one more.
func TestCalendarMigration(t *testing.T) {
	jakarta := mustZone(t, "Asia/Jakarta")
	now := time.Date(2027, 3, 17, 9, 0, 0, 0, jakarta).UnixMilli()
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		old := Limit{Algorithm: alg, Requests: 10, Period: 30 * 24 * time.Hour}
		utc := Limit{Algorithm: alg, Requests: 10, Calendar: Month}
		cal := Limit{Algorithm: alg, Requests: 10, Calendar: Month, Location: jakarta}
		for _, from := range []Limit{old, utc} {
			s, _ := DecideAt(from, State{}, Request{NowMs: now - 1000, Cost: 10})
			admitted := int64(0)
			for i := range 30 {
				var d Decision
				var n State
				if n, d = DecideAt(cal, s, Request{NowMs: now + int64(i)*1000, Cost: 1}); d.Allowed {
					s, admitted = n, admitted+1
				}
			}
			if admitted != 10 {
				t.Errorf("%v from %+v: admitted %d in the new month, want 10", alg, from, admitted)
			}
			// And back: the calendar state read by the fixed period.
			if _, d := DecideAt(old, s, Request{NowMs: now + 60_000, Cost: 1}); !d.Allowed {
				t.Errorf("%v back to 30d: %+v", alg, d)
			}
		}
	}
}

// The clock going back across a boundary: a sliding window stays in the
// stored (later) period, as for a fixed period; a fixed window's period
// counts on its own (fixedCount). More than a period back, the state is
// no boundary of the period decided and counts as empty.
func TestCalendarClockBack(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		l := Limit{Algorithm: alg, Requests: 2, Calendar: Day}
		midnight := time.Date(2027, 5, 10, 0, 0, 0, 0, time.UTC).UnixMilli()
		s, _ := DecideAt(l, State{}, Request{NowMs: midnight + 1000, Cost: 2})
		_, d := DecideAt(l, s, Request{NowMs: midnight - 1000, Cost: 1})
		if alg == FixedWindow {
			if !d.Allowed || d.Remaining != 1 {
				t.Errorf("%v a second back: %+v, want the earlier day's own count (allowed)", alg, d)
			}
			continue
		}
		if d.Allowed || d.Remaining != 0 {
			t.Errorf("%v a second back: %+v, want the later day's count kept (deny)", alg, d)
		}
		if d.RetryAfter <= time.Second {
			t.Errorf("%v a second back: RetryAfter %v, want beyond the lag", alg, d.RetryAfter)
		}
		if _, d := DecideAt(l, s, Request{NowMs: midnight - 3*86_400_000, Cost: 1}); !d.Allowed {
			t.Errorf("%v three days back: %+v", alg, d)
		}
	}
}

func BenchmarkDecideCalendar(b *testing.B) {
	jakarta, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2027, 3, 17, 9, 0, 0, 0, jakarta).UnixMilli()
	for _, l := range []Limit{
		{Algorithm: FixedWindow, Requests: 1 << 40, Period: 30 * 24 * time.Hour},
		{Algorithm: FixedWindow, Requests: 1 << 40, Calendar: Month, Location: jakarta},
		{Algorithm: SlidingWindow, Requests: 1000, Calendar: Day, Location: jakarta},
	} {
		b.Run(l.Algorithm.String()+"/"+l.Calendar.String(), func(b *testing.B) {
			var s State
			for i := range b.N {
				s, _ = DecideAt(l, s, Request{NowMs: now + int64(i), Cost: 1})
			}
		})
	}
}

// Property: with time moving forward through DST changes, month ends and
// a leap day, neither window admits more than Requests in any calendar
// period, and every RetryAfter of a deny is exact.
func TestCalendarNeverOverAdmits(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 14))
	for _, cal := range []Calendar{Day, Week, Month} {
		for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
			l := Limit{Algorithm: alg, Requests: 7, Calendar: cal, Location: ny}
			now := time.Date(2027, 10, 25, 0, 0, 0, 0, ny).UnixMilli()
			step := int64(cal.maxLength().Milliseconds() / 40)
			var s State
			admitted := map[int64]int64{} // by period start
			for range 3000 {
				now += rng.Int64N(step)
				cost := 1 + rng.Int64N(3)
				next, d := DecideAt(l, s, Request{NowMs: now, Cost: cost})
				b := cal.Bounds(ny, now)
				if d.Allowed {
					s = next
					admitted[b[1]] += cost
					if admitted[b[1]] > l.Requests {
						t.Fatalf("%v %v: %d admitted in the period from %v", alg, cal, admitted[b[1]], time.UnixMilli(b[1]).In(ny))
					}
					continue
				}
				w := d.RetryAfter.Milliseconds()
				if _, d2 := DecideAt(l, s, Request{NowMs: now + w - 1, Cost: cost}); d2.Allowed {
					t.Fatalf("%v %v at %v: admitted 1 ms before RetryAfter %v", alg, cal, time.UnixMilli(now).In(ny), d.RetryAfter)
				}
				if _, d2 := DecideAt(l, s, Request{NowMs: now + w, Cost: cost}); !d2.Allowed {
					t.Fatalf("%v %v at %v: denied at RetryAfter %v", alg, cal, time.UnixMilli(now).In(ny), d.RetryAfter)
				}
			}
		}
	}
}

// In zones whose clocks change at midnight (the day then starts at 01:00,
// or midnight happens twice), every instant of two years lies in the day,
// week, month and year Bounds gives it, each boundary starts a later
// local date than the one before, and every period but a skipped day is
// at least 22 hours long.
func TestCalendarBoundsMidnightChanges(t *testing.T) {
	for _, name := range []string{"America/Santiago", "America/Havana", "Asia/Beirut", "America/Asuncion", "Pacific/Apia", "Australia/Lord_Howe"} {
		loc := mustZone(t, name)
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
		for now := from; now < from+2*366*86_400_000; now += 3_600_000 + 7 {
			for _, c := range []Calendar{Day, Week, Month, Year} {
				b := c.Bounds(loc, now)
				if !(b[1] <= now && now < b[2]) {
					t.Fatalf("%s %v at %v: %v does not hold now", name, c, time.UnixMilli(now).In(loc), b)
				}
				for i := 1; i < len(b); i++ {
					if b[i]-b[i-1] < 22*3_600_000 {
						t.Fatalf("%s %v at %v: period %d of %v is %v long", name, c, time.UnixMilli(now).In(loc), i, b, time.Duration(b[i]-b[i-1])*time.Millisecond)
					}
					y0, m0, d0 := time.UnixMilli(b[i-1]).In(loc).Date()
					y1, m1, d1 := time.UnixMilli(b[i]).In(loc).Date()
					if !time.Date(y1, m1, d1, 0, 0, 0, 0, time.UTC).After(time.Date(y0, m0, d0, 0, 0, 0, 0, time.UTC)) {
						t.Fatalf("%s %v at %v: boundary %d on the same local date as the one before: %v", name, c, time.UnixMilli(now).In(loc), i, b)
					}
				}
			}
		}
	}
}

// Santiago skips midnight on 2026-09-06 (00:00 -04 is 01:00 -03): that day
// starts at 01:00, the day before lasts 24 hours. Havana sets its clocks
// back from 01:00 to 00:00 on 2026-11-01: that day starts at the first
// midnight and lasts 25 hours.
func TestCalendarMidnightDST(t *testing.T) {
	santiago, havana := mustZone(t, "America/Santiago"), mustZone(t, "America/Havana")
	b := Day.Bounds(santiago, time.Date(2026, 9, 6, 12, 0, 0, 0, santiago).UnixMilli())
	if got := time.UnixMilli(b[1]).In(santiago); got.Day() != 6 || got.Hour() != 1 || b[1]-b[0] != 24*3_600_000 {
		t.Errorf("Santiago Sep 6 starts %v, Sep 5 lasts %v", got, time.Duration(b[1]-b[0])*time.Millisecond)
	}
	b = Day.Bounds(havana, time.Date(2026, 11, 1, 12, 0, 0, 0, havana).UnixMilli())
	if got := time.UnixMilli(b[1]).In(havana); got.Day() != 1 || got.Hour() != 0 || b[2]-b[1] != 25*3_600_000 {
		t.Errorf("Havana Nov 1 starts %v and lasts %v", got, time.Duration(b[2]-b[1])*time.Millisecond)
	}
}
