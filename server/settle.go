package server

import (
	"context"
	"errors"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/giveback"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/store"
)

// Settle implements floodgate.v1.RateLimiter/Settle: the difference
// actual − reserved is charged as debt or refunded, once per idempotency
// key (store.Settler). It is never denied. When the store cannot decide
// the answer is degraded (nothing is known to be charged; the client
// retries with the same idempotency key).
func (r *RateLimiter) Settle(ctx context.Context, req *floodgatev1.SettleRequest) (*floodgatev1.SettleResponse, error) {
	s, err := r.resolveSettle(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	if s.Delta() < 0 {
		// A refund can fill a counter back up (a new idempotency key per
		// call): the give-back rule decides, as for Reset.
		if err := r.giveBackRefused(ctx, giveback.Refund, "actual"); err != nil {
			return nil, err
		}
	}
	settler, ok := r.store.(store.Settler)
	if !ok {
		return nil, toStatus(ctx, r.log, errors.New("the store cannot settle"))
	}
	now := r.clock()
	res, err := settler.Settle(ctx, now, s)
	switch {
	case err == nil:
		r.failures.OK(ctx, now)
	case errors.Is(err, store.ErrSettleConflict):
		r.observeSettle(s, observability.SettleConflict, 0)
		return nil, toStatus(ctx, r.log, invalidf("idempotency_key", "already settled with other numbers (reserved, actual): an idempotency key names one settlement"))
	case ctx.Err() != nil || errors.Is(err, store.ErrInvalid):
		return nil, toStatus(ctx, r.log, err)
	default:
		r.failures.Failed(ctx, now, err)
		r.observeSettle(s, observability.SettleDegraded, 0)
		return &floodgatev1.SettleResponse{Limit: s.Limit.Capacity(), Degraded: true}, nil
	}
	result := observability.SettleEven
	switch delta := s.Delta(); {
	case res.Duplicate:
		result = observability.SettleDuplicate
	case delta > 0:
		result = observability.SettleDebt
	case delta < 0:
		result = observability.SettleRefund
	}
	d := res.Decision
	r.observeSettle(s, result, d.Unrecorded)
	return &floodgatev1.SettleResponse{
		Limit:      d.Limit,
		Remaining:  d.Remaining,
		Debt:       d.Debt,
		RetryAfter: durationpb.New(d.RetryAfter),
		ResetAfter: durationpb.New(d.ResetAfter),
		Unrecorded: d.Unrecorded,
		Duplicate:  res.Duplicate,
	}, nil
}

// observeSettle counts a settlement when metrics are on.
func (r *RateLimiter) observeSettle(s store.Settlement, result string, unrecorded int64) {
	if r.metrics != nil {
		r.metrics.ObserveSettle(r.apiName, s.Limit.Algorithm, result, unrecorded)
	}
}

// resolveSettle validates a settlement and finds its limit, naming the
// field that is wrong.
func (r *RateLimiter) resolveSettle(ctx context.Context, req *floodgatev1.SettleRequest) (store.Settlement, error) {
	c, err := r.resolveTraced(ctx, costOne{req})
	if err != nil {
		return store.Settlement{}, err
	}
	ik := req.GetIdempotencyKey()
	switch {
	case req.GetReserved() < 0 || req.GetReserved() > algorithms.MaxScaled:
		return store.Settlement{}, invalidf("reserved", "must be in [0, 2^50], got %d", req.GetReserved())
	case req.GetActual() < 0 || req.GetActual() > algorithms.MaxScaled:
		return store.Settlement{}, invalidf("actual", "must be in [0, 2^50], got %d", req.GetActual())
	case ik == "":
		return store.Settlement{}, invalidf("idempotency_key", "required: it makes a retried Settle charge once (e.g. a request id or a random UUID made once per reservation)")
	case len(ik) > store.MaxIdempotencyKeyLen:
		return store.Settlement{}, invalidf("idempotency_key", "%d bytes exceed the limit of %d", len(ik), store.MaxIdempotencyKeyLen)
	}
	return store.Settlement{
		Key: c.req.Key, Scope: c.req.Scope, Limit: c.req.Limit,
		Reserved: req.GetReserved(), Actual: req.GetActual(), IdempotencyKey: ik,
	}, nil
}
