package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// TestCalendar: a calendar limit through the client: its own count, the
// reset at the next local boundary, and the server's errors for a bad
// zone, a policy mixed with a calendar and a token bucket.
func TestCalendar(t *testing.T) {
	addr, clock := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	ctx := context.Background()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(time.Date(2027, 3, 28, 12, 0, 0, 0, berlin)) // a day of 23 hours
	daily := client.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Calendar: algorithms.Day, TimeZone: "Europe/Berlin"}
	if d, err := c.Check(ctx, client.Request{Key: "k", Limit: daily}); err != nil || !d.Allowed || d.ResetAfter != 12*time.Hour {
		t.Fatalf("check: %+v %v, want allowed, reset at local midnight in 12h", d, err)
	}
	if d, err := c.Check(ctx, client.Request{Key: "k", Limit: daily}); err != nil || d.Allowed || d.RetryAfter != 12*time.Hour {
		t.Fatalf("second: %+v %v, want a deny for 12h", d, err)
	}
	for _, tc := range []struct {
		l    client.Limit
		code codes.Code
		msg  string
	}{
		{client.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Calendar: algorithms.Month, TimeZone: "Mars/Olympus"}, codes.InvalidArgument, "limit.time_zone"},
		{client.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Calendar: algorithms.Month}, codes.InvalidArgument, "limit.calendar"},
		{client.Limit{Policy: "free", Calendar: algorithms.Month}, codes.InvalidArgument, "both a policy"},
	} {
		_, err := c.Check(ctx, client.Request{Key: "k", Limit: tc.l})
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%+v: %v, want %v containing %q", tc.l, err, tc.code, tc.msg)
		}
	}
}
