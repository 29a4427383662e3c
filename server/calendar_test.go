package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
)

func calendarLimit(requests int64, cal floodgatev1.Calendar, zone string) *floodgatev1.CheckRequest_Limit {
	return &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: requests, Calendar: cal, TimeZone: zone}}
}

// TestCheckCalendarInvalid: every bad calendar limit is InvalidArgument
// naming the field, never a panic.
func TestCheckCalendarInvalid(t *testing.T) {
	h := start(t, nil, server.Settings{})
	fw := floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW
	month := floodgatev1.Calendar_CALENDAR_MONTH
	// The algorithms that take a calendar, as the API names them.
	windowed := algorithms.Names(algorithms.Which(func(f algorithms.Facts) bool { return f.Window }), "and", func(a algorithms.Algorithm) string { return a.Facts().Wire })
	for _, tc := range []struct {
		name string
		req  *floodgatev1.CheckRequest
		msg  string
	}{
		{"unknown zone", &floodgatev1.CheckRequest{Key: "k", Algorithm: fw, Source: calendarLimit(10, month, "Mars/Olympus")}, `limit.time_zone: unknown time zone "Mars/Olympus"`},
		{"local zone", &floodgatev1.CheckRequest{Key: "k", Algorithm: fw, Source: calendarLimit(10, month, "Local")}, `limit.time_zone: unknown time zone "Local"`},
		{"path as zone", &floodgatev1.CheckRequest{Key: "k", Algorithm: fw, Source: calendarLimit(10, month, "../../../etc/passwd")}, "limit.time_zone: unknown time zone"},
		{"token bucket", &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Source: calendarLimit(10, month, "")}, "limit.calendar: applies only to " + windowed + ", not token_bucket"},
		{"sliding log", &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW_LOG, Source: calendarLimit(10, month, "")}, "limit.calendar: applies only to"},
		{"unknown calendar", &floodgatev1.CheckRequest{Key: "k", Algorithm: fw, Source: calendarLimit(10, 9, "")}, "limit.calendar: unknown value 9"},
		{"negative calendar", &floodgatev1.CheckRequest{Key: "k", Algorithm: fw, Source: calendarLimit(10, -1, "")}, "limit.calendar: unknown value -1"},
		{"zone without calendar", &floodgatev1.CheckRequest{Key: "k", Algorithm: fw, Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1, Period: durationpb.New(time.Hour), TimeZone: "Asia/Jakarta"}}}, "limit.time_zone: applies only to a calendar limit"},
		{"period with calendar", &floodgatev1.CheckRequest{Key: "k", Algorithm: fw, Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1, Period: durationpb.New(time.Hour), Calendar: month}}}, "limit.period: must be unset with limit.calendar"},
		{"burst with calendar", &floodgatev1.CheckRequest{Key: "k", Algorithm: fw, Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1, Burst: 3, Calendar: month}}}, "limit.burst: applies only to ALGORITHM_TOKEN_BUCKET"},
		{"zero requests", &floodgatev1.CheckRequest{Key: "k", Algorithm: fw, Source: calendarLimit(0, month, "")}, "limit.requests: must be positive"},
		{"sliding year too large", &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW, Source: calendarLimit(1_000_000, floodgatev1.Calendar_CALENDAR_YEAR, "")}, "limit: requests 1000000 per calendar year exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.client.Check(context.Background(), tc.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("got %v, want InvalidArgument containing %q", err, tc.msg)
			}
		})
	}
}

// TestCheckCalendarMonth: 3 per calendar month in Jakarta, checked a
// minute before February starts there (17:00 UTC on Jan 31): the deny's
// retry_after and reset_after point at the local midnight; the same
// numbers in UTC, or as a fixed 30 days, count apart on the same key.
func TestCheckCalendarMonth(t *testing.T) {
	jakarta, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, nil, server.Settings{})
	h.clock.Set(time.Date(2027, 2, 1, 0, 0, 0, 0, jakarta).Add(-time.Minute))
	ctx := context.Background()
	fw := floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW
	req := &floodgatev1.CheckRequest{Key: "tenant:7", Algorithm: fw, Source: calendarLimit(3, floodgatev1.Calendar_CALENDAR_MONTH, "Asia/Jakarta")}
	for i := range 3 {
		if resp, err := h.client.Check(ctx, req); err != nil || !resp.Allowed || resp.ResetAfter.AsDuration() != time.Minute {
			t.Fatalf("check %d: %v %v, want allowed, reset_after 1m", i, resp, err)
		}
	}
	resp, err := h.client.Check(ctx, req)
	if err != nil || resp.Allowed || resp.RetryAfter.AsDuration() != time.Minute {
		t.Fatalf("4th: %v %v, want a deny with retry_after 1m", resp, err)
	}
	for _, other := range []*floodgatev1.CheckRequest{
		{Key: "tenant:7", Algorithm: fw, Source: calendarLimit(3, floodgatev1.Calendar_CALENDAR_MONTH, "")},
		{Key: "tenant:7", Algorithm: fw, Source: calendarLimit(3, floodgatev1.Calendar_CALENDAR_MONTH, "Europe/Berlin")},
		{Key: "tenant:7", Algorithm: fw, Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 3, Period: durationpb.New(30 * 24 * time.Hour)}}},
	} {
		if resp, err := h.client.Check(ctx, other); err != nil || !resp.Allowed || resp.Remaining != 2 {
			t.Errorf("%v: %v %v, want a count of its own", other.GetLimit(), resp, err)
		}
	}
	h.clock.Advance(time.Minute)
	if resp, err := h.client.Check(ctx, req); err != nil || !resp.Allowed || resp.Remaining != 2 || resp.ResetAfter.AsDuration() != 28*24*time.Hour {
		t.Fatalf("Feb 1 in Jakarta: %v %v, want allowed with reset_after 28 days", resp, err)
	}
}

// TestEnvoyCalendarDay: a rule of 2 per calendar day in New York, on the
// day the clocks go back (25 hours): duration_until_reset, Retry-After and
// the RateLimit headers point at the next local midnight, current_limit
// says per DAY, and RateLimit-Policy leaves out w (the window's length
// varies).
func TestEnvoyCalendarDay(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	h := startEnvoy(t, `domain: edge
descriptors:
  - key: plan
    rate_limit: {requests_per_unit: 2, period: calendar_day, time_zone: America/New_York}
`, nil, server.EnvoySettings{})
	// 22:00 on Nov 7 2027 in New York: 2 hours to local midnight, 26 after
	// the day began at 00:00 EDT.
	h.clock.Set(time.Date(2027, 11, 7, 22, 0, 0, 0, ny))
	for range 2 {
		if r := h.call(t, testkit.Descriptor("plan", "free")); codesOf(r) != "OK:OK" {
			t.Fatalf("got %s, want OK", codesOf(r))
		}
	}
	r := h.call(t, testkit.Descriptor("plan", "free"))
	s := r.Statuses[0]
	if codesOf(r) != "OVER_LIMIT:OVER_LIMIT" || s.DurationUntilReset.AsDuration() != 2*time.Hour ||
		s.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY || s.CurrentLimit.GetRequestsPerUnit() != 2 {
		t.Fatalf("3rd: %s %v, want OVER_LIMIT resetting in 2h, 2 per DAY", codesOf(r), s)
	}
	hs := headerMap(r)
	for k, v := range map[string]string{
		"ratelimit":         `"edge.plan";r=0;t=7200`,
		"retry-after":       "7200",
		"x-ratelimit-reset": "7200",
		"x-ratelimit-limit": "2",
	} {
		if hs[k] != v {
			t.Errorf("%s: got %q, want %q (all: %v)", k, hs[k], v, hs)
		}
	}
	if _, ok := hs["ratelimit-policy"]; ok {
		t.Errorf("ratelimit-policy %q for a calendar day, want none", hs["ratelimit-policy"])
	}
}

// TestCheckCalendarPolicy: a named policy with a calendar quota; its
// fixed_window default, reset at the next local Monday (an ISO week).
func TestCheckCalendarPolicy(t *testing.T) {
	cfg, err := rules.Parse("policies.yaml", []byte("policies:\n  weekly: {requests: 2, period: calendar_week, time_zone: Europe/Berlin}\n"))
	if err != nil {
		t.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, nil, server.Settings{Rules: testkit.StaticRules(cfg)})
	h.clock.Set(time.Date(2027, 3, 28, 23, 0, 0, 0, berlin)) // Sunday 23:00, the week's last hour
	req := &floodgatev1.CheckRequest{Key: "u", Cost: 2, Source: &floodgatev1.CheckRequest_Policy{Policy: "weekly"}}
	if resp, err := h.client.Check(context.Background(), req); err != nil || !resp.Allowed || resp.ResetAfter.AsDuration() != time.Hour {
		t.Fatalf("%v %v, want allowed, reset at Monday's midnight in 1h", resp, err)
	}
	req.Algorithm = floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET
	if _, err := h.client.Check(context.Background(), req); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("token bucket against a calendar policy: %v, want InvalidArgument", err)
	}
}
