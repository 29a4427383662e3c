package ratelimitheader_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/ratelimitheader"
	"github.com/floodgate/floodgate/internal/testkit/sfv"
)

func fields(fs []ratelimitheader.Field) map[string]string {
	m := map[string]string{}
	for _, f := range fs {
		m[f.Name] = f.Value
	}
	return m
}

func TestAppend(t *testing.T) {
	tests := []struct {
		name  string
		limit ratelimitheader.Limit
		state ratelimitheader.State
		want  map[string]string
	}{
		{
			"window",
			ratelimitheader.Window("per_ip", 100, time.Minute),
			ratelimitheader.State{Remaining: 42, ResetAfter: 23500 * time.Millisecond},
			map[string]string{
				"RateLimit-Policy": `"per_ip";q=100;w=60`, "RateLimit": `"per_ip";r=42;t=24`,
				"X-RateLimit-Limit": "100, 100;w=60", "X-RateLimit-Remaining": "42", "X-RateLimit-Reset": "24",
			},
		},
		{
			// 60/min burst 10 is 10 per 10s, not 10 per 60s.
			"token bucket: the burst over its refill time",
			ratelimitheader.Bucket("tb", 60, time.Minute, 10),
			ratelimitheader.State{Remaining: 9, ResetAfter: time.Second},
			map[string]string{"RateLimit-Policy": `"tb";q=10;w=10`, "X-RateLimit-Limit": "10, 10;w=10", "RateLimit": `"tb";r=9;t=1`},
		},
		{
			"token bucket, refill rounded up",
			ratelimitheader.Bucket("tb", 3, time.Hour, 0), // 3/h: 3 tokens refill in an hour
			ratelimitheader.State{Remaining: 2, ResetAfter: 20 * time.Minute},
			map[string]string{"RateLimit-Policy": `"tb";q=3;w=3600`, "RateLimit": `"tb";r=2;t=1200`},
		},
		{
			"token bucket refilling in under a second",
			ratelimitheader.Bucket("fast", 1000, time.Second, 10),
			ratelimitheader.State{Remaining: 10},
			map[string]string{"RateLimit-Policy": `"fast";q=10;w=1`},
		},
		{
			"denied",
			ratelimitheader.Window("w", 2, time.Minute),
			ratelimitheader.State{Denied: true, RetryAfter: 29100 * time.Millisecond, ResetAfter: time.Minute},
			map[string]string{"RateLimit": `"w";r=0;t=60`, "Retry-After": "30"},
		},
		{
			"denied, never admitted: a cost above the capacity",
			ratelimitheader.Window("w", 2, time.Minute),
			ratelimitheader.State{Denied: true, RetryAfter: -1},
			map[string]string{"Retry-After": "86400"},
		},
		{
			"denied with no wait still waits a second",
			ratelimitheader.Window("w", 2, time.Minute),
			ratelimitheader.State{Denied: true},
			map[string]string{"Retry-After": "1"},
		},
		{
			// A ban answered t=0 and no Retry-After.
			"deny all",
			ratelimitheader.DenyAll("ban", time.Second),
			ratelimitheader.State{Denied: true, RetryAfter: -1, Remaining: 5},
			map[string]string{
				"RateLimit-Policy": `"ban";q=0;w=1`, "RateLimit": `"ban";r=0;t=86400`,
				"X-RateLimit-Limit": "0, 0;w=1", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "86400", "Retry-After": "86400",
			},
		},
		{
			"window unknown: no policy",
			ratelimitheader.Limit{Name: "login", Quota: 5},
			ratelimitheader.State{Remaining: 4, ResetAfter: time.Second},
			map[string]string{"RateLimit-Policy": "", "RateLimit": `"login";r=4;t=1`, "X-RateLimit-Limit": "5"},
		},
		{
			"names as Structured Field strings",
			ratelimitheader.Window("caf\u00e9 \"q\" \\ 100%\n", 1, time.Second),
			ratelimitheader.State{},
			map[string]string{"RateLimit-Policy": `"caf%c3%a9 \"q\" \\ 100%25%0a";q=1;w=1`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := fields(ratelimitheader.Append(nil, tc.limit, tc.state))
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: got %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			if _, ok := got["Retry-After"]; ok != tc.state.Denied {
				t.Errorf("Retry-After present %v, want %v", ok, tc.state.Denied)
			}
			checkSyntax(t, got)
		})
	}
}

// checkSyntax parses every field as the Structured Field it must be.
func checkSyntax(t *testing.T, hs map[string]string) {
	t.Helper()
	for k, v := range hs {
		switch k {
		case "RateLimit-Policy", "RateLimit":
			l, err := sfv.ParseList(v)
			if err != nil || len(l) != 1 {
				t.Errorf("%s: %q: %v (members %d)", k, v, err, len(l))
				continue
			}
			if _, ok := l[0].Value.(string); !ok {
				t.Errorf("%s: %q: the member is %T, want a String", k, v, l[0].Value)
			}
			for _, p := range l[0].Params {
				if n, ok := p.Value.(int64); !ok || n < 0 {
					t.Errorf("%s: %q: parameter %s is %v, want a non-negative Integer", k, v, p.Key, p.Value)
				}
			}
		case "X-RateLimit-Limit":
			if _, err := sfv.ParseList(v); err != nil {
				t.Errorf("%s: %v", k, err)
			}
		default:
			if it, err := sfv.ParseItem(v); err != nil {
				t.Errorf("%s: %v", k, err)
			} else if _, ok := it.Value.(int64); !ok && k != "X-RateLimit-Degraded" {
				t.Errorf("%s: %q is not an Integer", k, v)
			}
		}
	}
}

func TestAppendDegraded(t *testing.T) {
	got := fields(ratelimitheader.AppendDegraded(nil, false, 0))
	if len(got) != 1 || got["X-RateLimit-Degraded"] != "true" {
		t.Fatalf("open: got %v, want only X-RateLimit-Degraded", got)
	}
	got = fields(ratelimitheader.AppendDegraded(nil, true, 300*time.Millisecond))
	if len(got) != 2 || got["Retry-After"] != "1" {
		t.Fatalf("closed: got %v, want X-RateLimit-Degraded and Retry-After: 1", got)
	}
	// A cost above a replica's local share: never, as the body says.
	got = fields(ratelimitheader.AppendDegraded(nil, true, -time.Second))
	if want := strconv.Itoa(ratelimitheader.NeverSeconds); len(got) != 2 || got["Retry-After"] != want {
		t.Fatalf("never: got %v, want X-RateLimit-Degraded and Retry-After: %s", got, want)
	}
	got = fields(ratelimitheader.AppendDegraded(nil, true, 2500*time.Millisecond))
	if got["Retry-After"] != "3" {
		t.Fatalf("2.5s: got %v, want Retry-After: 3", got)
	}
}

func TestLowerName(t *testing.T) {
	for _, f := range ratelimitheader.Append(nil, ratelimitheader.Window("n", 1, time.Second), ratelimitheader.State{Denied: true}) {
		if got := f.LowerName(); got == f.Name || got == "" {
			t.Errorf("%s: LowerName %q", f.Name, got)
		}
	}
	if got := (ratelimitheader.Field{Name: "X-Other"}).LowerName(); got != "x-other" {
		t.Errorf("LowerName of another field: %q", got)
	}
}

func TestTokenBucketHuge(t *testing.T) {
	// burst·period overflows 64 bits; the window still comes out right.
	l := ratelimitheader.Bucket("big", 1<<40, 1000*time.Hour, 1<<40)
	if l.Window != 1000*time.Hour {
		t.Fatalf("window %v, want 1000h", l.Window)
	}
}

// TestSeconds pins the rounding every header time goes through: up to the
// next whole second, so a client that waits as told is never early (a
// mutation rounding down survived the whole-second cases alone).
func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 0},
		{-1, 0},
		{0, 0},
		{1, 1},
		{time.Millisecond, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + 1, 2},
		{1001 * time.Millisecond, 2},
		{1500 * time.Millisecond, 2},
		{2 * time.Second, 2},
		{time.Minute - time.Millisecond, 60},
		{1<<63 - 1, 9223372037},
	} {
		if got := ratelimitheader.Seconds(tc.d); got != tc.want {
			t.Errorf("Seconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestMoreRestrictive(t *testing.T) {
	allow := func(remaining int64) ratelimitheader.State { return ratelimitheader.State{Remaining: remaining} }
	deny := func(wait time.Duration) ratelimitheader.State {
		return ratelimitheader.State{Denied: true, RetryAfter: wait}
	}
	for _, tc := range []struct {
		name string
		a, b ratelimitheader.State
		want bool
	}{
		{"fewer remaining", allow(2), allow(5), true},
		{"more remaining", allow(5), allow(2), false},
		{"equals", allow(2), allow(2), false},
		{"a deny beats an allow", deny(time.Second), allow(0), true},
		{"an allow loses to a deny", allow(0), deny(time.Second), false},
		{"the longer wait", deny(2 * time.Second), deny(time.Second), true},
		{"the shorter wait", deny(time.Second), deny(2 * time.Second), false},
		{"never is the longest wait", deny(-1), deny(time.Hour), true},
		{"a wait loses to never", deny(time.Hour), deny(-1), false},
		{"equal waits: fewer remaining", ratelimitheader.State{Denied: true, RetryAfter: time.Second}, ratelimitheader.State{Denied: true, RetryAfter: time.Second, Remaining: 1}, true},
	} {
		if got := ratelimitheader.MoreRestrictive(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: MoreRestrictive(%+v, %+v) = %v, want %v", tc.name, tc.a, tc.b, got, tc.want)
		}
	}
}
