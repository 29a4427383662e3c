package main

import (
	"testing"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
)

// TestCalendarLimitPeriods: a calendar --limit names its period as the
// config file does (calendar_month); anything else is refused.
func TestCalendarLimitPeriods(t *testing.T) {
	for per, want := range map[string]algorithms.Calendar{"calendar_day": algorithms.Day, "calendar_week": algorithms.Week, "calendar_month": algorithms.Month, "calendar_year": algorithms.Year} {
		var l client.Limit
		if err := new(callFlags).calendarLimit(&l, "3", per); err != nil || l.Calendar != want || l.Requests != 3 || l.Algorithm != algorithms.Compatible {
			t.Errorf("%s: %+v, %v; want calendar %v, 3 requests, %v", per, l, err, want, algorithms.Compatible)
		}
	}
	for _, per := range []string{"calendar_", "calendar_fortnight", "calendar_calendar_day", "calendar_Month"} {
		var l client.Limit
		if err := new(callFlags).calendarLimit(&l, "3", per); err == nil {
			t.Errorf("%s: accepted as %+v", per, l)
		}
	}
}
