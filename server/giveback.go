package server

import (
	"context"
	"errors"
	"slices"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/internal/giveback"
	"github.com/floodgate/floodgate/internal/observability"
)

// refusedLogEvery is the least time between two logs of refused
// give-backs of one API; the refusals between are counted in the next.
const refusedLogEvery = 10 * time.Second

// giveBackRefused asks the one give-back rule (internal/giveback) whether
// the call of ctx may give budget back in the way of kind. Refused, it
// counts and logs the refusal and returns the PermissionDenied answer
// naming field; allowed, nil.
func (d *decider) giveBackRefused(ctx context.Context, kind giveback.Kind, field string) error {
	err := giveback.Allowed(ctx, kind)
	if err == nil {
		return nil
	}
	d.observeRefusal(kind, err)
	return status.Errorf(codes.PermissionDenied, "%s: %v", field, err)
}

// observeRefusal counts and logs (at most every refusedLogEvery) one
// refused give-back.
func (d *decider) observeRefusal(kind giveback.Kind, err error) {
	k := observability.GiveBackRefund
	if kind == giveback.Reset {
		k = observability.GiveBackReset
	}
	if d.metrics != nil {
		d.metrics.ObserveGiveBackRefused(d.apiName, k)
	}
	if n, ok := d.refusals.Allow(time.Now(), refusedLogEvery); ok {
		d.log.Warn("a give-back was refused", "api", d.apiName, "kind", k, "why", err.Error(), "refused_since_last_log", n)
	}
}

// withoutRefusedRefunds returns req itself when its negative hits
// (is_negative_hits) may be given (or it has none), else a copy in which
// each such descriptor asks 0 hits: Envoy lets a request through on any
// error answer, so a refused refund is decided as a look at the limit,
// never answered with an error.
func (e *Envoy) withoutRefusedRefunds(ctx context.Context, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitRequest {
	if !slices.ContainsFunc(req.GetDescriptors(), (*ratelimitv3.RateLimitDescriptor).GetIsNegativeHits) {
		return req
	}
	err := giveback.Allowed(ctx, giveback.Refund)
	if err == nil && e.opts.NoRefunds {
		err = errRefundsOff
	}
	if err == nil {
		return req
	}
	e.observeRefusal(giveback.Refund, err)
	out := proto.Clone(req).(*rlsv3.RateLimitRequest)
	for _, d := range out.GetDescriptors() {
		if d.GetIsNegativeHits() {
			d.IsNegativeHits, d.HitsAddend = false, wrapperspb.UInt64(0)
		}
	}
	return out
}

// errRefundsOff is the refusal of every negative hit with
// EnvoySettings.NoRefunds (--envoy-refunds=false).
var errRefundsOff = errors.New("refunds are turned off on this server (--envoy-refunds=false)")
