package client

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// isConfigError reports whether err says the limiter is set up wrong
// rather than down: a token floodgate rejects or lacks (Unauthenticated,
// PermissionDenied), an unknown policy (NotFound), a limit, key or cost it
// rejects (InvalidArgument), a server that is no floodgate (Unimplemented),
// or a Limit this package refuses before asking. Failing open on these
// would serve every request unlimited until someone noticed, so the
// middleware and interceptors never do: they answer "misconfigured" and
// log it.
func isConfigError(err error) bool {
	if errors.Is(err, errBothSources) {
		return true
	}
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.NotFound, codes.InvalidArgument, codes.Unimplemented:
		return true
	}
	return false
}

// misconfigLog logs configuration errors once, not once per request: the
// first error of a run, and again only when the error's code changes or
// after a decision succeeded in between. It is safe for concurrent use.
type misconfigLog struct {
	log *slog.Logger
	// last is 1 + the code of the last error logged; 0 when none was
	// logged since the last successful decision.
	last atomic.Uint32
}

func newMisconfigLog(log *slog.Logger) *misconfigLog {
	if log == nil {
		log = slog.Default()
	}
	return &misconfigLog{log: log}
}

// failed records a configuration error, logging it if it is news. where
// names the middleware or the gRPC method, for the log.
func (m *misconfigLog) failed(ctx context.Context, where string, err error) {
	code := status.Code(err)
	if m.last.Swap(uint32(code)+1) == uint32(code)+1 {
		return
	}
	m.log.ErrorContext(ctx, "floodgate rate limiting is misconfigured; rejecting requests until it is fixed (logged once)",
		"where", where, "code", code.String(), "err", err)
}

// ok records a successful decision, so the next configuration error is
// logged again.
func (m *misconfigLog) ok() {
	if m.last.Load() != 0 {
		m.last.Store(0)
	}
}
