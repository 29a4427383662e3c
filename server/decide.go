package server

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/keys"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store"
)

// oneDecision holds the store request and decision of a Check, allocated
// as one block.
type oneDecision struct {
	reqs [1]store.Request
	out  [1]algorithms.Decision
}

// decide asks the store, reading the clock once. reqs is a buffer of
// len(checks) for the store requests. When the store cannot decide some
// checks, their failure modes answer (degraded, see storeDecide): open
// allows, closed denies, local decides with the replica's share
// (decideFailed). A request whose own context ended gets that error.
func (r *RateLimiter) decide(ctx context.Context, checks []check, reqs []store.Request, out []algorithms.Decision) (degraded bool, err error) {
	reqs = reqs[:len(checks)]
	for i := range checks {
		reqs[i] = checks[i].req
	}
	now := r.clock()
	a, err := r.storeTraced(ctx, failedBatch{now: now, reqs: reqs, out: out},
		func(k int) rules.FailureMode { return checks[k].failureMode },
		func(k int) spanLimit { return checks[k].spanLimit() })
	if err != nil {
		return false, err
	}
	r.observe(checks, out, a.degraded)
	if !a.any() {
		r.track(now, checks, out)
	}
	return a.any(), nil
}

// observe counts decisions in the metrics; degraded[i] (nil: none) says
// check i took its failure mode. Peeks count nothing.
func (r *RateLimiter) observe(checks []check, out []algorithms.Decision, degraded []bool) {
	if r.metrics == nil {
		return
	}
	for i := range checks {
		c := &checks[i]
		if c.req.DryRun || c.req.Cost <= 0 {
			continue
		}
		res := result(out[i].Allowed, c.shadow, degraded != nil && degraded[i], c.failureMode == rules.FailureLocal)
		r.metrics.ObserveDecision(observability.Labels{API: r.apiName, Rule: c.rule, Algorithm: c.req.Limit.Algorithm, Result: res}, observability.NearLimit(out[i], c.warnAt))
	}
}

// track hands a Check API call's decisions at now to the heavy-hitter
// tracker (Settings.Limited), each under its policy or inline limit.
func (r *RateLimiter) track(now time.Time, checks []check, out []algorithms.Decision) {
	if r.limited == nil {
		return
	}
	for i := range checks {
		c := &checks[i]
		if c.req.DryRun {
			continue
		}
		policy := c.rule
		if keys.IsInlineScope(c.req.Scope) {
			policy = ""
		}
		r.limited.ObserveCheck(now, policy, c.shadow, c.req.Limit, keys.CheckKey(c.req.Key), c.req.Cost, out[i].Allowed)
	}
}

// result is the metrics label of a decision; local says a degraded one
// was decided by the replica's local share.
func result(allowed, shadow, degraded, local bool) string {
	switch {
	case degraded && local:
		return observability.ResultLocal
	case degraded:
		return observability.ResultDegraded
	case allowed:
		return observability.ResultAllowed
	case shadow:
		return observability.ResultShadowDenied
	}
	return observability.ResultDenied
}

// failedDecision is the answer to r when the store could not decide: open
// allows, closed denies what would spend (retry after degradedRetryAfter).
func failedDecision(r store.Request, mode rules.FailureMode) algorithms.Decision {
	d := algorithms.Decision{Allowed: true, Limit: r.Limit.Capacity()}
	if mode == rules.FailureClosed && r.Cost > 0 {
		d.Allowed, d.RetryAfter = false, degradedRetryAfter
	}
	return d
}

// neverRetryAfter is the retry_after of a cost that no wait lets
// through (algorithms.Never): negative, which the client reads as
// ErrNeverAdmitted and the HTTP headers as ratelimitheader.NeverSeconds.
// A cost above the limit's capacity is refused before it is decided
// (InvalidArgument), and one above a replica's local share is answered
// with the wait until its period ends (localshare), so this is a guard: a
// negative wait never leaves as anything but this one value.
const neverRetryAfter = -time.Second

// checkResponse builds the answer to one check. Shadow mode turns a deny
// into an allow (the deny is still decided and counted in metrics).
func checkResponse(c check, d algorithms.Decision, degraded bool) *floodgatev1.CheckResponse {
	// The response and its two durations as one block (as durationpb.New).
	b := new(checkResponseBlock)
	resp := &b.resp
	resp.Allowed = d.Allowed || c.shadow
	resp.Limit = d.Limit
	resp.Remaining = d.Remaining
	resp.Degraded = degraded
	resp.WarnAt = c.warnAt
	resp.Warning = warned(resp.Allowed, d, degraded, c.warnAt)
	b.reset.Seconds, b.reset.Nanos = int64(d.ResetAfter/time.Second), int32(d.ResetAfter%time.Second)
	resp.ResetAfter = &b.reset
	if !resp.Allowed {
		retry := d.RetryAfter
		if retry < 0 {
			retry = neverRetryAfter
		}
		b.retry.Seconds, b.retry.Nanos = int64(retry/time.Second), int32(retry%time.Second)
	}
	resp.RetryAfter = &b.retry
	// The wait of an algorithm that waits; 0 for the others (always set, as
	// retry_after is, so that JSON shows "0s" rather than null).
	b.wait.Seconds, b.wait.Nanos = int64(d.Wait/time.Second), int32(d.Wait%time.Second)
	resp.Wait = &b.wait
	return resp
}

// checkResponseBlock is a CheckResponse with its durations.
type checkResponseBlock struct {
	resp               floodgatev1.CheckResponse
	reset, retry, wait durationpb.Duration
}
