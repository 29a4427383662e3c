package ratelimitheader_test

import (
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/ratelimitheader"
	"github.com/floodgate/floodgate/internal/testkit/sfv"
)

// TestWarning: RateLimit-Warning is written for an allowed request that
// reached the limit's threshold, never for a denied one, a limit without
// a threshold or a ban; it is a Structured Field List of the policy name
// with the Integer at, and several members join into one field.
func TestWarning(t *testing.T) {
	l := ratelimitheader.Window("caf\u00e9", 10, time.Minute)
	l.WarnAt = 8
	tests := []struct {
		name  string
		l     ratelimitheader.Limit
		s     ratelimitheader.State
		field string
	}{
		{"allowed past the threshold", l, ratelimitheader.State{Remaining: 1, Warning: true}, `"caf%c3%a9";at=8`},
		{"allowed below it", l, ratelimitheader.State{Remaining: 5}, ""},
		{"denied", l, ratelimitheader.State{Denied: true, RetryAfter: time.Second, Warning: true}, ""},
		{"no threshold", ratelimitheader.Window("n", 10, time.Minute), ratelimitheader.State{Warning: true}, ""},
		{"ban", ratelimitheader.Limit{Name: "b", DenyAll: true, WarnAt: 1}, ratelimitheader.State{Warning: true}, ""},
	}
	for _, tt := range tests {
		got := fields(ratelimitheader.Append(nil, tt.l, tt.s))[ratelimitheader.WarningName]
		if got != tt.field {
			t.Errorf("%s: RateLimit-Warning %q, want %q", tt.name, got, tt.field)
		}
	}

	p := ratelimitheader.Prepare(l)
	fs := ratelimitheader.AppendWarning(nil, p.WarningMember(), ratelimitheader.WarningMember("b", 80))
	if len(fs) != 1 || fs[0].Name != "RateLimit-Warning" || fs[0].LowerName() != "ratelimit-warning" {
		t.Fatalf("AppendWarning: %+v", fs)
	}
	list, err := sfv.ParseList(fs[0].Value)
	if err != nil || len(list) != 2 {
		t.Fatalf("%q: %v, %d members", fs[0].Value, err, len(list))
	}
	for i, want := range []struct {
		name string
		at   int64
	}{{"caf%c3%a9", 8}, {"b", 80}} {
		m := list[i]
		if m.Value != want.name || len(m.Params) != 1 || m.Params[0].Key != "at" || m.Params[0].Value != want.at {
			t.Errorf("member %d of %q: %+v, want %s;at=%d", i, fs[0].Value, m, want.name, want.at)
		}
	}
	if fs := ratelimitheader.AppendWarning(nil); len(fs) != 0 || strings.Contains(ratelimitheader.WarningName, " ") {
		t.Errorf("AppendWarning of nothing: %+v", fs)
	}
}
