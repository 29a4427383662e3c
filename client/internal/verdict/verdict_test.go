package verdict

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/client"
)

func TestIsConfigError(t *testing.T) {
	for code, want := range map[codes.Code]bool{
		codes.Unauthenticated: true, codes.PermissionDenied: true, codes.NotFound: true,
		codes.InvalidArgument: true, codes.Unimplemented: true,
		codes.Unavailable: false, codes.DeadlineExceeded: false, codes.ResourceExhausted: false, codes.Internal: false,
	} {
		err := fmt.Errorf("floodgate check: %w", status.Error(code, "x"))
		if got := IsConfigError(err); got != want {
			t.Errorf("%v: IsConfigError %v, want %v", code, got, want)
		}
	}
	if IsConfigError(errors.New("no status")) || IsConfigError(context.DeadlineExceeded) {
		t.Error("an error without a gRPC status counts as a configuration error")
	}
}

func TestCombined(t *testing.T) {
	allow := func(remaining int64) client.Decision { return client.Decision{Allowed: true, Remaining: remaining} }
	deny := func(wait time.Duration) client.Decision { return client.Decision{RetryAfter: wait} }
	for _, tc := range []struct {
		name    string
		b       client.BatchDecision
		want    int
		allowed bool
	}{
		{"fewer remaining", client.BatchDecision{Allowed: true, Decisions: []client.Decision{allow(5), allow(2)}}, 1, true},
		{"equals: the first", client.BatchDecision{Allowed: true, Decisions: []client.Decision{allow(2), allow(2)}}, 0, true},
		{"a deny beats an allow", client.BatchDecision{Decisions: []client.Decision{allow(0), deny(time.Second)}}, 1, false},
		{"the longer wait", client.BatchDecision{Decisions: []client.Decision{deny(2 * time.Second), deny(time.Second)}}, 0, false},
		// A batch can be denied although each check alone would fit; the
		// answer is denied as a whole.
		{"denied as a whole", client.BatchDecision{Decisions: []client.Decision{allow(3), allow(1)}}, 1, false},
	} {
		d, i := Combined(tc.b)
		if i != tc.want || d.Allowed != tc.allowed || d.Remaining != tc.b.Decisions[tc.want].Remaining {
			t.Errorf("%s: got %+v at %d, want index %d, allowed %v", tc.name, d, i, tc.want, tc.allowed)
		}
	}
}
