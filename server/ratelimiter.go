package server

import (
	"cmp"
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/giveback"
	"github.com/floodgate/floodgate/internal/keys"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/zones"
	"github.com/floodgate/floodgate/store"
)

// Defaults for Settings' zero values.
const (
	DefaultMaxKeyBytes = 4096
	maxBatch           = 128 // the checks of one CheckBatch
	// degradedRetryAfter is the Retry-After of a limit that failed closed:
	// about when the store is probed again.
	degradedRetryAfter = time.Second
)

// RuleSource gives the current configuration.
type RuleSource interface {
	Current() *rules.Set
}

// currentRules is src's configuration, nil (no rules) when src is nil.
func currentRules(src RuleSource) *rules.Set {
	if src == nil {
		return nil
	}
	return src.Current()
}

// RateLimiter serves floodgate.v1.RateLimiter.
type RateLimiter struct {
	floodgatev1.UnimplementedRateLimiterServer

	decider
	zones zones.Cache // the time zones of inline calendar limits
}

var _ floodgatev1.RateLimiterServer = (*RateLimiter)(nil)

// NewRateLimiter returns the Check API served from st.
func NewRateLimiter(st store.Store, s CheckSettings) *RateLimiter {
	return &RateLimiter{decider: newDecider(st, s.Settings, cmp.Or(s.API, observability.APICheck))}
}

// Check implements floodgate.v1.RateLimiter/Check.
func (r *RateLimiter) Check(ctx context.Context, req *floodgatev1.CheckRequest) (*floodgatev1.CheckResponse, error) {
	c, err := r.resolveTraced(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	if err := r.checkRefund(ctx, "cost", c); err != nil {
		return nil, err
	}
	b := new(oneDecision) // goes to the store: on the heap, as one block
	degraded, err := r.decide(ctx, []check{c}, b.reqs[:], b.out[:])
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	resp := checkResponse(c, b.out[0], degraded)
	if resp.Warning {
		sendWarning(ctx, []check{c}, []*floodgatev1.CheckResponse{resp})
	}
	return resp, nil
}

// resolveAll resolves the checks of a batch, all of them or an error
// naming the first that fails.
func (r *RateLimiter) resolveAll(req *floodgatev1.CheckBatchRequest) ([]check, error) {
	checks := make([]check, len(req.GetChecks()))
	for i, cr := range req.GetChecks() {
		c, err := r.resolve(cr)
		if err != nil {
			return checks[:i], within(fmtIndex("checks", i), err)
		}
		checks[i] = c
	}
	return checks, nil
}

// CheckBatch implements floodgate.v1.RateLimiter/CheckBatch: all or nothing.
func (r *RateLimiter) CheckBatch(ctx context.Context, req *floodgatev1.CheckBatchRequest) (*floodgatev1.CheckBatchResponse, error) {
	n := len(req.GetChecks())
	switch {
	case n == 0:
		return nil, toStatus(ctx, r.log, invalidf("checks", "must hold at least one check"))
	case n > maxBatch:
		return nil, toStatus(ctx, r.log, invalidf("checks", "%d checks exceed the limit of %d per batch", n, maxBatch))
	}
	checks, err := r.resolveAllTraced(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	for i, c := range checks {
		if err := r.checkRefund(ctx, fmtIndex("checks", i)+".cost", c); err != nil {
			return nil, err
		}
	}
	out := make([]algorithms.Decision, n)
	degraded, err := r.decide(ctx, checks, make([]store.Request, n), out)
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	resp := &floodgatev1.CheckBatchResponse{Allowed: true, Results: make([]*floodgatev1.CheckResponse, n)}
	for i, c := range checks {
		resp.Results[i] = checkResponse(c, out[i], degraded)
		resp.Allowed = resp.Allowed && resp.Results[i].Allowed
	}
	if !resp.Allowed {
		// Nothing was charged: no check of a denied batch warns.
		for _, res := range resp.Results {
			res.Warning = false
		}
	}
	sendWarning(ctx, checks, resp.Results)
	return resp, nil
}

// Peek implements floodgate.v1.RateLimiter/Peek: a Check that charges nothing.
func (r *RateLimiter) Peek(ctx context.Context, req *floodgatev1.PeekRequest) (*floodgatev1.PeekResponse, error) {
	c, err := r.resolveTraced(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	// One store call, two looks: what is spendable now (cost 0), and
	// whether this cost would pass (a dry run).
	now := c
	now.req.Cost = 0
	c.req.DryRun = true
	var reqs [2]store.Request
	var out [2]algorithms.Decision
	degraded, err := r.decide(ctx, []check{now, c}, reqs[:], out[:])
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	cr := checkResponse(c, out[1], degraded)
	return &floodgatev1.PeekResponse{
		Allowed:    cr.Allowed,
		Limit:      cr.Limit,
		Remaining:  out[0].Remaining,
		RetryAfter: cr.RetryAfter,
		ResetAfter: durationpb.New(out[0].ResetAfter),
		Degraded:   cr.Degraded,
		Wait:       cr.Wait, // the dry run's: the wait this Check would get
		Warning:    cr.Warning,
		WarnAt:     cr.WarnAt,
	}, nil
}

// Reset implements floodgate.v1.RateLimiter/Reset. With a limit or a
// policy it forgets that one count of the key; without, every count of
// the key, whatever limit made it (the store finds them by key).
func (r *RateLimiter) Reset(ctx context.Context, req *floodgatev1.ResetRequest) (*floodgatev1.ResetResponse, error) {
	if err := r.giveBackRefused(ctx, giveback.Reset, "Reset"); err != nil {
		return nil, err
	}
	alg := algorithms.Algorithm(req.GetAlgorithm())
	var scopes []string
	if req.GetPolicy() != "" || req.GetLimit() != nil {
		c, err := r.resolve(costOne{req})
		if err != nil {
			return nil, toStatus(ctx, r.log, err)
		}
		alg, scopes = c.req.Limit.Algorithm, []string{c.req.Scope}
	} else if err := r.validateKey(req.GetKey()); err != nil {
		return nil, toStatus(ctx, r.log, err)
	} else if alg != algorithms.Unspecified && !alg.Valid() {
		return nil, toStatus(ctx, r.log, invalidf("algorithm", "unknown value %d", int32(alg)))
	}
	if err := r.store.Reset(ctx, alg, keys.Check(req.GetKey()), scopes...); err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	return &floodgatev1.ResetResponse{}, nil
}
