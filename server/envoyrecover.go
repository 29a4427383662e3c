package server

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/ratelimitheader"
	"github.com/floodgate/floodgate/internal/rules"
)

// The Envoy API never answers an error for anything a client sends: Envoy
// lets a request through on any error answer (its filter's default), so
// an error would be a way around every limit. Validation answers with a
// status; a panic anywhere under ShouldRateLimit is caught here and
// becomes the failure-mode answer of the request's limits, logged and
// counted (floodgate_handler_panics_total), exactly as if the store had
// failed: a limit whose failure mode is closed answers OVER_LIMIT, the
// others (open, local) OK, and the answer says it is degraded.

// panicLogEvery is the least time between two logs of caught panics; the
// panics between are counted in the next line.
const panicLogEvery = 10 * time.Second

// recovered is the answer to req after a panic p under its handler;
// planned are the limits planned for it so far (nil when it panicked
// before they were known: the server's failure mode then answers for
// every descriptor).
func (e *Envoy) recovered(ctx context.Context, req *rlsv3.RateLimitRequest, planned []envoyCheck, p any) *rlsv3.RateLimitResponse {
	if e.metrics != nil {
		e.metrics.ObservePanic(observability.APIEnvoy)
	}
	if n, ok := e.panics.Allow(time.Now(), panicLogEvery); ok {
		e.log.ErrorContext(ctx, "panic under ShouldRateLimit: answered by the limits' failure modes",
			"panic", fmt.Sprint(p), "panics_since_last_log", n, "stack", string(debug.Stack()))
	}
	n := len(req.GetDescriptors())
	blk, _ := newResponse(n)
	resp := &blk.resp
	closed := make([]bool, n)
	if planned == nil {
		for i := range closed {
			closed[i] = e.failureMode == rules.FailureClosed
		}
	}
	for i := range planned {
		c := &planned[i]
		if c.shadow || c.fixed || c.req.Cost <= 0 || c.desc < 0 || c.desc >= n {
			continue
		}
		closed[c.desc] = closed[c.desc] || e.modeOf(c.limit.FailureMode) == rules.FailureClosed
	}
	for i, st := range resp.Statuses {
		if closed[i] {
			st.Code, resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OVER_LIMIT
		}
	}
	if !e.opts.NoHeaders {
		over := resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT
		resp.ResponseHeadersToAdd = headerValues(ratelimitheader.AppendDegraded(nil, over, degradedRetryAfter), nil)
	}
	return resp
}
