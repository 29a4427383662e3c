// Package store is the contract between floodgate's server and the places
// limit state lives: the embedded memory store (store/memstore) and Redis
// (store/redisstore). Every implementation passes the conformance suite in
// store/storetest.
//
// Being over a limit is a decision, never an error. An error from a Store
// means it could not decide (Redis unreachable, the context ended); the
// server then applies the limit's failure mode.
//
// The API follows floodgate's releases: v0, no compatibility promise yet.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// Request is one check inside a Decide call.
type Request struct {
	// Key identifies the limited thing. Opaque bytes chosen by the server;
	// two requests share state iff they have the same Key, the same Scope
	// and the same Limit.Algorithm. Implementations must keep distinct
	// keys and scopes apart whatever bytes they hold.
	Key string
	// Scope names which of the limits on Key this state belongs to, so
	// that two limits on one key never share a counter (a policy's name, or
	// an inline limit's numbers). "" is a scope like any other. A Reset of
	// Key without scopes forgets every scope of it, so implementations keep
	// a key's scopes findable from the key (in one memory shard, in one
	// Redis key pattern).
	Scope string
	// Limit is the rate to enforce. It must be valid (Limit.Validate).
	Limit algorithms.Limit
	// Cost > 0 spends, 0 looks, < 0 refunds (see algorithms.Decide).
	Cost int64
	// DryRun decides as if charging Cost but writes nothing (Peek).
	DryRun bool
	// Mode changes how the request is decided (algorithms.DecideAt); 0
	// is the plain decision. algorithms.NoWait admits a request of an
	// algorithm that waits only if it may start now (Envoy's ShouldRateLimit);
	// algorithms.Debt charges a positive Cost even when it does not fit
	// (usage after the fact; the decision is allowed). Decide leaves the
	// Decision's Debt and Unrecorded 0 (Settler reports them).
	Mode algorithms.Mode
}

// Store decides requests against stored state.
type Store interface {
	// Decide decides reqs together and writes the decision for reqs[i] to
	// out[i] (len(out) must equal len(reqs)). It is all or nothing: when
	// any request with a positive cost is denied, no request is charged,
	// and every decision still says whether that request would have
	// fitted given the requests before it. Decisions are made in order, each
	// seeing the charges of the admitted requests before it (so a key
	// repeated in one call is charged twice).
	//
	// now is the time of the decision; a store with its own clock (Redis'
	// TIME) may use that instead. An error means nothing was decided; out is
	// then unspecified.
	Decide(ctx context.Context, now time.Time, reqs []Request, out []algorithms.Decision) error
	// Reset forgets key under algorithm alg, or under every algorithm when
	// alg is algorithms.Unspecified; under the given scopes only, or under
	// every scope of key when none is given. Forgetting every scope may
	// cost more than a decision (Redis scans for the key's scopes); it is
	// an operator's action, not a hot path.
	Reset(ctx context.Context, alg algorithms.Algorithm, key string, scopes ...string) error
	// Ping reports whether the store can decide right now.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}

// ValidateDecide reports what is wrong with a Decide call's arguments,
// wrapping ErrInvalid: an out whose length is not reqs', or a request
// whose limit is invalid (Limit.Validate), named by its index.
func ValidateDecide(reqs []Request, out []algorithms.Decision) error {
	if len(out) != len(reqs) {
		return fmt.Errorf("%w: %d requests but %d decisions", ErrInvalid, len(reqs), len(out))
	}
	for i := range reqs {
		if err := reqs[i].Limit.Validate(); err != nil {
			return fmt.Errorf("request %d: %w: %w", i, ErrInvalid, err)
		}
	}
	return nil
}

// ValidateDemand reports what is wrong with a ReportDemand call's
// arguments, wrapping ErrInvalid: an out whose length is not reports', or
// a report whose TTL is not positive.
func ValidateDemand(reports []DemandReport, out []DemandTotal) error {
	if len(out) != len(reports) {
		return fmt.Errorf("%w: %d reports but %d totals", ErrInvalid, len(reports), len(out))
	}
	for _, r := range reports {
		if r.TTL <= 0 {
			return fmt.Errorf("%w: TTL %v is not positive", ErrInvalid, r.TTL)
		}
	}
	return nil
}

// ErrUnavailable is wrapped by errors that mean the backing service could
// not be reached or did not answer in time.
var ErrUnavailable = errors.New("store unavailable")

// ErrMisconfigured is wrapped by errors that mean the backing service
// answers but is set up so that it can never decide: a Redis Cluster node
// addressed as one Redis, a read-only replica. Waiting does not help; an
// operator must change the configuration. It wraps ErrUnavailable, since
// decisions fail just the same and the failure modes answer them.
var ErrMisconfigured error = misconfigured{}

type misconfigured struct{}

func (misconfigured) Error() string { return "store misconfigured" }
func (misconfigured) Unwrap() error { return ErrUnavailable }

// ErrInvalid is wrapped by errors that mean a request was malformed (for
// example a mismatched out slice); they are bugs in the caller.
var ErrInvalid = errors.New("invalid store request")
