// Package verdict holds what the HTTP middleware and the gRPC interceptors
// share in turning floodgate's reply into their answer: which errors mean
// a misconfiguration (never served open) and logging those once, and which
// decision of a batch the answer describes.
package verdict

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/internal/ratelimitheader"
)

// IsConfigError reports whether err says the limiter is set up wrong
// rather than down: a token floodgate rejects or lacks (Unauthenticated,
// PermissionDenied), an unknown policy (NotFound), a limit, key or cost it
// rejects or the client refuses before asking (InvalidArgument), a server
// that is no floodgate (Unimplemented). Failing open on these would serve
// every request unlimited until someone noticed, so the middleware and
// interceptors never do: they answer "misconfigured" and log it.
func IsConfigError(err error) bool {
	return slices.Contains([]codes.Code{codes.Unauthenticated, codes.PermissionDenied, codes.NotFound, codes.InvalidArgument, codes.Unimplemented}, status.Code(err))
}

// MisconfigLog logs configuration errors once, not once per request: the
// first error of a run, and again only when the error's code changes or
// after a decision succeeded in between. It is safe for concurrent use.
type MisconfigLog struct {
	log *slog.Logger
	// last is 1 + the code of the last error logged; 0 when none was
	// logged since the last successful decision.
	last atomic.Uint32
}

// NewMisconfigLog logs to log; nil means slog.Default().
func NewMisconfigLog(log *slog.Logger) *MisconfigLog {
	return &MisconfigLog{log: cmp.Or(log, slog.Default())}
}

// Failed records a configuration error, logging it if it is news. where
// names the middleware or the gRPC method, for the log.
func (m *MisconfigLog) Failed(ctx context.Context, where string, err error) {
	code := status.Code(err)
	if m.last.Swap(uint32(code)+1) == uint32(code)+1 {
		return
	}
	m.log.ErrorContext(ctx, "floodgate rate limiting is misconfigured; rejecting requests until it is fixed (logged once)",
		"where", where, "code", code.String(), "err", err)
}

// OK records a successful decision, so the next configuration error is
// logged again.
func (m *MisconfigLog) OK() {
	if m.last.Load() != 0 {
		m.last.Store(0)
	}
}

// State is what the rate-limit headers say of d.
func State(d client.Decision) ratelimitheader.State {
	return ratelimitheader.State{
		Remaining:  d.Remaining,
		ResetAfter: d.ResetAfter,
		Denied:     !d.Allowed,
		RetryAfter: d.RetryAfter,
	}
}

// Combined is the decision a batch's answer describes, and its index in
// the batch: the most restrictive check's (the first of equals), ordered
// as the server's headers order them (ratelimitheader.MoreRestrictive: a
// deny beats an allow, a longer wait a shorter one, fewer remaining more),
// allowed only if the whole batch was (a batch denied by one check is
// denied as a whole).
func Combined(b client.BatchDecision) (client.Decision, int) {
	i := 0
	for j, o := range b.Decisions[1:] {
		if ratelimitheader.MoreRestrictive(State(o), State(b.Decisions[i])) {
			i = j + 1
		}
	}
	d := b.Decisions[i]
	d.Allowed = b.Allowed
	return d, i
}
