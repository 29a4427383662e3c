package storetest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// zone loads an IANA zone for the calendar cases.
func (h *harness) zone(name string) *time.Location {
	h.t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		h.t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

// testCalendar runs calendar limits through the store: a monthly quota in
// Jakarta across a month end (the window is the local month; the deny's
// RetryAfter is exact to the local midnight of the 1st, and the new month
// admits the whole quota), then seeded random traces over days of 23 and
// 25 hours (New York's daylight-saving changes), ISO weeks and a leap
// February, and a key migrating from a fixed 30-day period to a calendar
// month, every decision matching the model.
func testCalendar(h *harness) {
	jakarta := h.zone("Asia/Jakarta")
	for _, alg := range windowed() {
		l := algorithms.Limit{Algorithm: alg, Requests: 3, Calendar: algorithms.Month, Location: jakarta}
		key := h.key("month-end-" + alg.String())
		m := newModel()
		feb1 := time.Date(2027, 2, 1, 0, 0, 0, 0, jakarta)
		step := func(what string, now time.Time, cost int64) algorithms.Decision {
			h.t.Helper()
			return h.decideBoth(m, now, fmt.Sprintf("%v %s", alg, what), store.Request{Key: key, Limit: l, Cost: cost})[0]
		}
		now := feb1.Add(-time.Minute)
		for i := range 3 {
			if d := step(fmt.Sprintf("spend %d on Jan 31", i), now, 1); !d.Allowed {
				h.t.Fatalf("%v spend %d on Jan 31: %s", alg, i, fmtDecision(d))
			}
		}
		d := step("deny on Jan 31", now, 1)
		if alg.Facts().Afresh && (d.Allowed || d.RetryAfter != time.Minute) {
			h.t.Errorf("%v: %s, want a deny until Feb 1 in Jakarta (1m)", alg, fmtDecision(d))
		}
		if d := step("Feb 1", feb1, 3); alg.Facts().Afresh && !d.Allowed {
			h.t.Errorf("%v Feb 1: %s, want the whole new month", alg, fmtDecision(d))
		}
		step("Feb 1, 1ms later", feb1.Add(time.Millisecond), 1)
	}

	ny := h.zone("America/New_York")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0xca1))
	for _, tc := range []struct {
		name  string
		l     algorithms.Limit
		start time.Time
		step  time.Duration
	}{
		{"spring-forward", algorithms.Limit{Requests: 6, Calendar: algorithms.Day, Location: ny}, time.Date(2027, 3, 12, 20, 0, 0, 0, ny), 3 * time.Hour},
		{"fall-back", algorithms.Limit{Requests: 6, Calendar: algorithms.Day, Location: ny}, time.Date(2027, 11, 5, 20, 0, 0, 0, ny), 3 * time.Hour},
		{"iso-week", algorithms.Limit{Requests: 9, Calendar: algorithms.Week}, time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC), 14 * time.Hour},
		{"leap-february", algorithms.Limit{Requests: 9, Calendar: algorithms.Month}, time.Date(2028, 2, 20, 0, 0, 0, 0, time.UTC), 40 * time.Hour},
		{"year-end", algorithms.Limit{Requests: 9, Calendar: algorithms.Year, Location: jakarta}, time.Date(2026, 12, 25, 0, 0, 0, 0, jakarta), 90 * time.Hour},
	} {
		for _, alg := range windowed() {
			l := tc.l
			l.Algorithm = alg
			key := h.key("trace-" + tc.name + "-" + alg.String())
			m := newModel()
			now := tc.start
			for i := range 120 {
				now = now.Add(time.Duration(rng.Int64N(int64(tc.step))).Truncate(time.Millisecond))
				req := store.Request{Key: key, Limit: l, Cost: rng.Int64N(l.Requests+3) - 1}
				h.decideBoth(m, now, fmt.Sprintf("%s %v step %d at %v", tc.name, alg, i, now), req)
			}
		}
	}

	// A rule migrating from a fixed 30-day period to the calendar month on
	// the same key and scope: the old count does not carry, the month
	// admits its quota and not one more.
	for _, alg := range windowed() {
		key := h.key("migrate-" + alg.String())
		m := newModel()
		now := time.Date(2027, 3, 17, 9, 0, 0, 0, jakarta)
		old := store.Request{Key: key, Limit: algorithms.Limit{Algorithm: alg, Requests: 5, Period: 30 * 24 * time.Hour}, Cost: 5}
		h.decideBoth(m, now, "30d", old)
		cal := store.Request{Key: key, Limit: algorithms.Limit{Algorithm: alg, Requests: 5, Calendar: algorithms.Month, Location: jakarta}, Cost: 1}
		admitted := 0
		for i := range 8 {
			now = now.Add(time.Second)
			got := h.decideBoth(m, now, fmt.Sprintf("%v calendar month, call %d", alg, i), cal)
			if got[0].Allowed {
				admitted++
			}
		}
		if admitted != 5 {
			h.t.Errorf("%v: the migrated month admitted %d, want 5", alg, admitted)
		}
	}
}
