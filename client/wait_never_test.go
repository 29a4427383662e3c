package client_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// TestWaitNOverALocalShare: the store is down and two replicas share a
// token bucket of 10 a minute (5 each); WaitN of 6 fits the limit but
// never the share, which answers the wait until the minute ends: with a
// shorter deadline WaitN ends at once with ErrWaitTooLong after one
// Check, instead of retrying in a loop; WaitN of 5 passes.
func TestWaitNOverALocalShare(t *testing.T) {
	addr := floodgatetest.StartLocalShare(t, nil, 2)
	var checks atomic.Int64
	c := floodgatetest.Dial(t, addr, client.WithDialOptions(grpc.WithChainUnaryInterceptor(countChecks(&checks))))
	tb := client.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WaitN(ctx, "k", tb, 6); !errors.Is(err, client.ErrWaitTooLong) {
		t.Fatalf("WaitN(6) on a share of 5: %v, want ErrWaitTooLong", err)
	}
	if n := checks.Load(); n != 1 {
		t.Errorf("WaitN(6) sent %d Checks, want 1", n)
	}
	if err := c.WaitN(ctx, "k", tb, 5); err != nil {
		t.Errorf("WaitN(5) on a share of 5: %v", err)
	}
}

// TestWaitNeverSpinsOnAZeroRetry: a server that denies with retry_after 0
// (one that cannot say when) is asked again no sooner than a second
// later, never in a loop.
func TestWaitNeverSpinsOnAZeroRetry(t *testing.T) {
	srv := grpc.NewServer()
	deny := &zeroRetryLimiter{}
	floodgatev1.RegisterRateLimiterServer(srv, deny)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c := floodgatetest.Dial(t, lis.Addr().String())

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := c.Wait(ctx, "k", leaky20); !errors.Is(err, client.ErrWaitTooLong) {
		t.Errorf("Wait with a 300ms deadline: %v, want ErrWaitTooLong", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	deny.checks.Store(0)
	if err := c.Wait(ctx, "k", leaky20); !errors.Is(err, client.ErrWaitTooLong) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with a 1.5s deadline: %v, want ErrWaitTooLong or the deadline", err)
	}
	if n := deny.checks.Load(); n < 1 || n > 2 {
		t.Errorf("Wait sent %d Checks in 1.5s against retry_after 0, want 1 or 2", n)
	}
}

// zeroRetryLimiter denies every Check with retry_after 0.
type zeroRetryLimiter struct {
	floodgatev1.UnimplementedRateLimiterServer
	checks atomic.Int64
}

func (z *zeroRetryLimiter) Check(context.Context, *floodgatev1.CheckRequest) (*floodgatev1.CheckResponse, error) {
	z.checks.Add(1)
	return &floodgatev1.CheckResponse{Limit: 20, RetryAfter: durationpb.New(0)}, nil
}

// countChecks counts the Check calls a client makes.
func countChecks(n *atomic.Int64) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == floodgatev1.RateLimiter_Check_FullMethodName {
			n.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}
