package keys

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// TestInlineScope: an inline limit's scope is short, and distinct numbers
// never share one (a period is written in its largest whole unit, so each
// period has one spelling).
func TestInlineScope(t *testing.T) {
	tests := []struct {
		l    algorithms.Limit
		want string
	}{
		{algorithms.Limit{Requests: 100, Period: time.Minute}, "i100/1m"},
		{algorithms.Limit{Requests: 100, Period: 60 * time.Minute}, "i100/1h"},
		{algorithms.Limit{Requests: 10, Period: 90 * time.Second, Burst: 50}, "i10/90s/50"},
		{algorithms.Limit{Requests: 1, Period: 1500 * time.Millisecond}, "i1/1500ms"},
		{algorithms.Limit{Requests: 5, Period: 24 * time.Hour}, "i5/24h"},
	}
	for _, tt := range tests {
		if got := InlineScope(tt.l); got != tt.want {
			t.Errorf("InlineScope(%+v) = %q, want %q", tt.l, got, tt.want)
		}
	}
	seen := map[string]algorithms.Limit{}
	for _, req := range []int64{1, 10, 11, 100, 110} {
		for _, ms := range []int64{1, 10, 100, 1000, 1100, 60_000, 61_000, 3_600_000, 36_000_000, 60} {
			for _, burst := range []int64{0, 1, 10, 100} {
				l := algorithms.Limit{Requests: req, Period: time.Duration(ms) * time.Millisecond, Burst: burst}
				s := InlineScope(l)
				if prev, ok := seen[s]; ok {
					t.Fatalf("%+v and %+v share the scope %q", prev, l, s)
				}
				seen[s] = l
			}
		}
	}
}

// A calendar limit never shares an inline scope with a fixed period of the
// same numbers, another calendar period or another time zone.
func TestInlineScopeCalendar(t *testing.T) {
	jakarta, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		t.Fatal(err)
	}
	limits := []algorithms.Limit{
		{Requests: 100, Period: 24 * time.Hour},
		{Requests: 100, Calendar: algorithms.Day},
		{Requests: 100, Calendar: algorithms.Day, Location: jakarta},
		{Requests: 100, Calendar: algorithms.Month, Location: jakarta},
		{Requests: 100, Calendar: algorithms.Month, Location: time.UTC},
	}
	want := []string{"i100/24h", "i100/day@UTC", "i100/day@Asia/Jakarta", "i100/month@Asia/Jakarta", "i100/month@UTC"}
	for i, l := range limits {
		if got := InlineScope(l); got != want[i] {
			t.Errorf("InlineScope(%+v) = %q, want %q", l, got, want[i])
		}
	}
}
