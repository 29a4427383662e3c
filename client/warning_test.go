package client_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// TestDecisionWarning: Check and Peek surface the soft limit: WarnAt
// always, Warning once the usage reaches it; an inline limit carries its
// threshold, a policy the server's.
func TestDecisionWarning(t *testing.T) {
	cfg := floodgatetest.StaticRules(t, "policies:\n  partner: {requests: 10, period: 1m, warn_at: 80%}\n")
	addr, _ := floodgatetest.Start(t, cfg)
	c := floodgatetest.Dial(t, addr)
	ctx := context.Background()
	for _, l := range []client.Limit{
		client.Policy("partner"),
		{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute, WarnAt: 8},
		{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: time.Minute, WarnAtPercent: 80},
	} {
		for i := 1; i <= 11; i++ {
			p, err := c.Peek(ctx, client.Request{Key: "k", Limit: l})
			if err != nil {
				t.Fatal(err)
			}
			d, err := c.Check(ctx, client.Request{Key: "k", Limit: l})
			if err != nil {
				t.Fatal(err)
			}
			wantWarning := i >= 8 && i <= 10
			if d.Allowed != (i <= 10) || d.Warning != wantWarning || d.WarnAt != 8 {
				t.Fatalf("%+v, check %d: got %+v, want warning %v, warn at 8", l, i, d, wantWarning)
			}
			if p.Warning != wantWarning || p.WarnAt != 8 {
				t.Fatalf("%+v, peek before check %d: got %+v, want warning %v", l, i, p, wantWarning)
			}
		}
	}
	_, err := c.Check(ctx, client.Request{Key: "k", Limit: client.Limit{Policy: "partner", WarnAt: 5}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a policy with WarnAt: got %v, want InvalidArgument", err)
	}
	_, err = c.Check(ctx, client.Request{Key: "k", Limit: client.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Minute, WarnAt: 11}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("WarnAt above the limit: got %v, want InvalidArgument", err)
	}
}
