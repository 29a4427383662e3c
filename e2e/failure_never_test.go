package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestFailureLocalShareNeverFits: Redis down, --replicas 2,
// --failure-mode local, a token bucket of 10 a minute (a share of 5): a
// Check of cost 6 fits the limit but never the share. gRPC answers a
// degraded deny with a retry_after of the time left in the minute, whole
// seconds, never negative; the HTTP/JSON door says the same in its body
// and its Retry-After header; client.Client.WaitN of 6 with a shorter deadline
// ends with ErrWaitTooLong after one Check instead of spinning.
func TestFailureLocalShareNeverFits(t *testing.T) {
	r := redistest.StartServer(t)
	p := startServe(t, "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "200ms", "--replicas", "2", "--failure-mode", "local")
	r.Kill()
	c := p.Client(t)
	check := &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Cost: 6,
		Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 10, Period: durationpb.New(time.Minute)}}}
	var resp *floodgatev1.CheckResponse
	waitFor(t, 30*time.Second, "a degraded answer", func() bool {
		var err error
		resp, err = c.Check(context.Background(), check)
		return err == nil && resp.Degraded
	})
	inMinute := func(d time.Duration) bool { return d >= time.Second && d <= time.Minute && d%time.Second == 0 }
	if resp.Allowed || resp.Limit != 5 || !inMinute(resp.RetryAfter.AsDuration()) {
		t.Errorf("gRPC, cost 6 of a share of 5: %v, want denied, limit 5, a retry_after of whole seconds within the minute", resp)
	}

	a := postWith(t, p, "/v1/check", `{"key": "k", "algorithm": "ALGORITHM_TOKEN_BUCKET", "cost": 6, "limit": {"requests": 10, "period": "60s"}}`,
		map[string]string{"Content-Type": "application/json"})
	var body struct {
		Allowed    bool   `json:"allowed"`
		Degraded   bool   `json:"degraded"`
		RetryAfter string `json:"retryAfter"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("HTTP answer %d %s: %v", a.status, a.body, err)
	}
	retry, err := time.ParseDuration(body.RetryAfter)
	if a.status != http.StatusOK || body.Allowed || !body.Degraded || err != nil || !inMinute(retry) {
		t.Errorf("HTTP, cost 6: %d %s, want a degraded deny with a retryAfter within the minute", a.status, a.body)
	}
	if got, want := a.header.Get("Retry-After"), strconv.Itoa(int(retry/time.Second)); got != want {
		t.Errorf("HTTP, cost 6: Retry-After %q beside a body of %s, want %s", got, body.RetryAfter, want)
	}

	var checks atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		checks.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	fc, err := client.Dial(p.GRPCAddr, client.WithTimeout(10*time.Second), client.WithDialOptions(grpc.WithChainUnaryInterceptor(count)))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = fc.WaitN(ctx, "k", client.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}, 6)
	if !errors.Is(err, client.ErrWaitTooLong) || checks.Load() != 1 {
		t.Errorf("WaitN(6): %v after %d Checks in %v, want ErrWaitTooLong after 1", err, checks.Load(), time.Since(start))
	}
}
