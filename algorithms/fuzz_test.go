package algorithms_test

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// fuzzStepBytes is the size of one trace step in FuzzDecide's input:
// 2 bytes of signed Δt, 1 byte of shift for it, 2 bytes of signed cost.
const fuzzStepBytes = 5

// FuzzDecide plays a trace of (Δt, cost) decoded from bytes against any
// limit and checks every decision: no panic, Remaining in [0, capacity],
// RetryAfter >= 0 or Never, Allowed ⇒ RetryAfter == 0, a deny or a peek
// keeps the state, and a deny's RetryAfter is exact.
func FuzzDecide(f *testing.F) {
	step := func(dt int16, shift uint8, cost int16) []byte {
		b := make([]byte, fuzzStepBytes)
		binary.LittleEndian.PutUint16(b, uint16(dt))
		b[2] = shift
		binary.LittleEndian.PutUint16(b[3:], uint16(cost))
		return b
	}
	trace := func(steps ...[]byte) []byte {
		var out []byte
		for _, s := range steps {
			out = append(out, s...)
		}
		return out
	}
	burst := trace(step(0, 0, 3), step(0, 0, 1), step(0, 0, 1), step(20, 10, 1), step(1, 0, 0), step(-1, 10, 2), step(0, 0, -2), step(0, 0, 99))
	edge := trace(step(1990, 0, 1), step(0, 0, 9), step(20, 0, 1), step(190, 0, 1), step(-1000, 0, 0), step(1, 20, 5))
	for alg := range uint8(len(algorithms.All())) {
		f.Add(alg, int64(3), int64(60_000), int64(0), int64(0), burst)
		f.Add(alg, int64(10), int64(2000), int64(20), int64(1990), edge)
		f.Add(alg, int64(7), int64(1000), int64(1), int64(-5), trace(step(-300, 2, 7), step(3, 3, 8), step(0, 0, -32768)))
		f.Add(alg, int64(1)<<40, int64(1)<<20, int64(0), int64(math.MaxInt64), trace(step(32767, 23, 32767), step(-32768, 23, -32768)))
		for cal := range uint8(5) { // calendar periods (ignored by the token bucket and the log)
			f.Add(alg|cal<<4, int64(7), int64(0), int64(0), int64(1_000_000), trace(step(1, 22, 3), step(-1, 21, 4), step(3, 20, 5), step(1, 24, 7), step(0, 0, -3)))
		}
	}
	f.Fuzz(func(t *testing.T, alg uint8, requests, periodMs, burst, start int64, raw []byte) {
		l := algorithms.Limit{
			Algorithm: algorithms.All()[int(alg)%len(algorithms.All())],
			Requests:  requests,
			Period:    time.Duration(periodMs) * time.Millisecond,
			Burst:     burst,
		}
		if l.Algorithm.Facts().Burst == "" {
			l.Burst = 0 // a window takes no burst
		}
		// alg's bits 4-6 pick a calendar period (in a zone with daylight
		// saving) for the window algorithms.
		if cal := algorithms.Calendar((alg >> 4) % 5); cal != algorithms.NoCalendar &&
			(l.Algorithm == algorithms.FixedWindow || l.Algorithm == algorithms.SlidingWindow) {
			l.Calendar, l.Location, l.Period, l.Burst = cal, fuzzZone, 0, 0
			if l.Validate() != nil {
				l.Requests = 1 + abs(requests)%10_000
			}
		}
		if l.Validate() != nil || periodMs > algorithms.MaxWait.Milliseconds() {
			// Fold into a small valid limit so most inputs test something.
			l.Requests = 1 + abs(requests)%10_000
			if l.Calendar == algorithms.NoCalendar {
				l.Period = time.Duration(1+abs(periodMs)%86_400_000) * time.Millisecond
				if l.Algorithm.Facts().Burst != "" {
					l.Burst = abs(burst) % 100_000
				}
			}
			if l.Validate() != nil {
				return
			}
		}
		if len(raw) > 200*fuzzStepBytes {
			raw = raw[:200*fuzzStepBytes]
		}
		// Any Unix ms a Redis TIME can give: [0, 2^53).
		const maxNow = 1 << 53
		now := epoch.UnixMilli() + start%(1<<40)
		var s algorithms.State
		for i := 0; len(raw)-i*fuzzStepBytes >= fuzzStepBytes; i++ {
			b := raw[i*fuzzStepBytes:]
			dt := int64(int16(binary.LittleEndian.Uint16(b))) << (b[2] % 24)
			cost := int64(int16(binary.LittleEndian.Uint16(b[3:])))
			now = min(max(now+dt, 0), maxNow-1)

			next, d := algorithms.DecideAt(l, s, algorithms.Request{NowMs: now, Cost: cost})
			if err := checkDecision(l, cost, d); err != nil {
				t.Fatalf("%s, step %d (now %d, cost %d): %+v: %v", desc(l), i, now, cost, d, err)
			}
			if (!d.Allowed || cost == 0) && !sameState(next, s) {
				t.Fatalf("%s, step %d (now %d, cost %d): a deny or a peek changed the state from %+v to %+v", desc(l), i, now, cost, s, next)
			}
			if !d.Allowed && d.RetryAfter != algorithms.Never {
				wait := d.RetryAfter.Milliseconds()
				if _, e := algorithms.DecideAt(l, s, algorithms.Request{NowMs: now + wait, Cost: cost}); !e.Allowed {
					t.Fatalf("%s, step %d (now %d, cost %d): retry after %v still denies: %+v", desc(l), i, now, cost, d.RetryAfter, e)
				}
				if _, e := algorithms.DecideAt(l, s, algorithms.Request{NowMs: now + wait - 1, Cost: cost}); wait > 1 && e.Allowed {
					t.Fatalf("%s, step %d (now %d, cost %d): retry after %v, but 1ms earlier admits", desc(l), i, now, cost, d.RetryAfter)
				}
			}
			if d.Allowed {
				if _, e := algorithms.DecideAt(l, next, algorithms.Request{NowMs: now, Cost: d.Remaining + 1}); e.Allowed {
					t.Fatalf("%s, step %d (now %d, cost %d): remaining %d, yet %d more were admitted", desc(l), i, now, cost, d.Remaining, d.Remaining+1)
				}
			}
			s = next
		}
	})
}

// fuzzZone is the calendar limits' zone in FuzzDecide: New York, whose
// days of 23 and 25 hours test the period lengths.
var fuzzZone = func() *time.Location {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	return loc
}()

func abs(v int64) int64 {
	if v < 0 {
		if v == math.MinInt64 {
			return math.MaxInt64
		}
		return -v
	}
	return v
}
