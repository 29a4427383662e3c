package rlqs

import (
	"context"
	"io"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
)

// fakeStream is the server side of one stream, in memory: the test writes
// reports to in and reads responses from out.
type fakeStream struct {
	grpc.ServerStream // nil: only Context, Send and Recv are used
	ctx               context.Context
	in                chan *rlqsv3.RateLimitQuotaUsageReports
	out               chan *rlqsv3.RateLimitQuotaResponse
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func (f *fakeStream) Send(r *rlqsv3.RateLimitQuotaResponse) error {
	select {
	case f.out <- r:
		return nil
	case <-f.ctx.Done():
		return f.ctx.Err()
	}
}

func (f *fakeStream) Recv() (*rlqsv3.RateLimitQuotaUsageReports, error) {
	select {
	case m, ok := <-f.in:
		if !ok {
			return nil, io.EOF
		}
		return m, nil
	case <-f.ctx.Done():
		return nil, f.ctx.Err()
	}
}

// fakeClient runs one stream on svc; end is its handler's result.
type fakeClient struct {
	*fakeStream
	cancel context.CancelFunc
	end    chan struct{} // closed when the handler returned err
	err    error
}

func openFake(t testing.TB, svc *Service) *fakeClient {
	ctx, cancel := context.WithCancel(context.Background())
	fs := &fakeStream{ctx: ctx, in: make(chan *rlqsv3.RateLimitQuotaUsageReports), out: make(chan *rlqsv3.RateLimitQuotaResponse, 64)}
	c := &fakeClient{fakeStream: fs, cancel: cancel, end: make(chan struct{})}
	go func() {
		c.err = svc.StreamRateLimitQuotas(fs)
		close(c.end)
	}()
	t.Cleanup(func() {
		cancel()
		<-c.end
	})
	return c
}

// next waits for the next response.
func (c *fakeClient) next(t testing.TB) *rlqsv3.RateLimitQuotaResponse {
	t.Helper()
	select {
	case r := <-c.out:
		return r
	case <-c.end:
		// A handler sends its last response and then returns: both cases
		// may be ready at once, and select picks one at random. What
		// was sent before the end is still the next response.
		select {
		case r := <-c.out:
			return r
		default:
		}
		t.Fatalf("stream ended with %v while waiting for a response", c.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no response in 10s")
	}
	return nil
}
