package rules

import (
	"fmt"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/algorithms"
)

// Calendar quotas in a rules file: period: calendar_month with a time_zone,
// on a rate_limit and on a policy; a policy's calendar quota counts with
// the fixed window unless an algorithm is given.
func TestCalendarRules(t *testing.T) {
	c, err := Parse("calendar.yaml", []byte(`domain: api
descriptors:
  - key: plan
    value: monthly
    rate_limit: {requests_per_unit: 10000, period: calendar_month, time_zone: Asia/Jakarta}
  - key: plan
    value: daily
    rate_limit: {requests_per_unit: 500, period: calendar_day, time_zone: America/New_York, algorithm: sliding_window}
  - key: plan
    value: weekly
    rate_limit: {requests_per_unit: 70, period: calendar_week}
policies:
  monthly: {requests: 10000, period: calendar_month, time_zone: Asia/Jakarta}
  yearly: {algorithm: sliding_window, requests: 1000, period: calendar_year, time_zone: Europe/Berlin}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		value string
		alg   algorithms.Algorithm
		req   int64
		cal   algorithms.Calendar
		zone  string
	}{
		{"monthly", algorithms.FixedWindow, 10000, algorithms.Month, "Asia/Jakarta"},
		{"daily", algorithms.SlidingWindow, 500, algorithms.Day, "America/New_York"},
		{"weekly", algorithms.FixedWindow, 70, algorithms.Week, "UTC"},
	} {
		r := one(t, c, "api", e("plan", tc.value)...).Rate
		if r.Algorithm != tc.alg || r.Requests != tc.req || r.Calendar != tc.cal || r.Period != 0 || r.Location.String() != tc.zone {
			t.Errorf("plan=%s: %+v, want %v %d per %v in %s", tc.value, r, tc.alg, tc.req, tc.cal, tc.zone)
		}
	}
	for name, want := range map[string]algorithms.Limit{
		"monthly": {Algorithm: algorithms.FixedWindow, Requests: 10000, Calendar: algorithms.Month},
		"yearly":  {Algorithm: algorithms.SlidingWindow, Requests: 1000, Calendar: algorithms.Year},
	} {
		p, ok := c.Policy(name)
		if !ok || p.Rate.Algorithm != want.Algorithm || p.Rate.Requests != want.Requests || p.Rate.Calendar != want.Calendar || p.Rate.Location == nil {
			t.Errorf("policy %s = %+v, want %+v", name, p.Rate, want)
		}
	}
}

// Rules of one zone share its *time.Location, resolved once per file: a
// ban list of many calendar rules does not read the zone database per rule.
func TestCalendarZoneResolvedOnce(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "  - {key: k, value: v%d, rate_limit: {requests_per_unit: 5, period: calendar_day, time_zone: Asia/Jakarta}}\n", i)
	}
	c, err := Parse("many.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	first := one(t, c, "d", e("k", "v0")...).Rate.Location
	if last := one(t, c, "d", e("k", "v1999")...).Rate.Location; first == nil || last != first {
		t.Errorf("the zone was resolved per rule: %p, %p", first, last)
	}
}
