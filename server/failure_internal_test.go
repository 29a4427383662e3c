package server

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store"
)

// TestFailedDecision: with the store down, open allows everything and
// closed denies only what would spend: a look (cost 0) and a refund are
// allowed, each with the limit's capacity as its Limit.
func TestFailedDecision(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Period: time.Minute}
	for _, tc := range []struct {
		mode    rules.FailureMode
		cost    int64
		dry     bool
		allowed bool
	}{
		{rules.FailureOpen, 1, false, true},
		{rules.FailureOpen, 0, false, true},
		{rules.FailureClosed, 1, false, false},
		{rules.FailureClosed, 3, true, false},
		{rules.FailureClosed, 0, false, true},
		{rules.FailureClosed, -2, false, true},
	} {
		d := failedDecision(store.Request{Key: "k", Limit: l, Cost: tc.cost, DryRun: tc.dry}, tc.mode)
		wantRetry := time.Duration(0)
		if !tc.allowed {
			wantRetry = degradedRetryAfter
		}
		if d.Allowed != tc.allowed || d.RetryAfter != wantRetry || d.Limit != l.Capacity() {
			t.Errorf("%v, cost %d, dry run %v: %+v, want allowed %v, retry after %v, limit %d", tc.mode, tc.cost, tc.dry, d, tc.allowed, wantRetry, l.Capacity())
		}
	}
}
