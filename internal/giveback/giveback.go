// Package giveback is the one rule for everything that gives budget back
// (Reset, refunds, Envoy's negative hits), so that a limit holds whichever
// door a caller takes: every front door asks Allowed first.
//
// A port beyond loopback on a server with no tokens (and, on gRPC, no
// client certificates) gives nothing back, since nothing there tells an
// operator from anyone who reaches the port (WithRefusal). With tokens,
// the admin role may give back every way and the refund role may refund.
// docs/security.md says how each API answers a refusal.
package giveback

import (
	"context"
	"errors"
	"net"

	"github.com/floodgate/floodgate/internal/auth"
)

// Kind is a way of giving budget back.
type Kind int

// The kinds of give-back.
const (
	// Reset forgets a key's counts.
	Reset Kind = iota
	// Refund gives units back: a negative cost, a settlement below its
	// reservation, Envoy's negative hits.
	Refund
)

// ErrRefused is wrapped by Allowed's errors.
var ErrRefused = errors.New("giving budget back is refused")

// refused is a refusal with the reason an operator can act on.
type refused struct{ reason string }

func (r refused) Error() string { return r.reason }
func (r refused) Unwrap() error { return ErrRefused }

type refusalKey struct{}

// WithRefusal returns ctx carrying reason, the refusal of the port the
// call came in on ("" when the port may give back).
func WithRefusal(ctx context.Context, reason string) context.Context {
	if reason == "" {
		return ctx
	}
	return context.WithValue(ctx, refusalKey{}, reason)
}

// Allowed returns nil when the call of ctx may give budget back in the
// way of kind, else an error wrapping ErrRefused that says why and what
// would allow it.
func Allowed(ctx context.Context, kind Kind) error {
	if reason, _ := ctx.Value(refusalKey{}).(string); reason != "" {
		return refused{reason}
	}
	switch {
	case kind == Reset && !auth.ResetAllowed(ctx):
		return refused{"Reset needs a token with the admin role"}
	case kind == Refund && !auth.RefundAllowed(ctx):
		return refused{"giving units back needs a token with the refund or admin role"}
	}
	return nil
}

// PortRefusal is why a port bound to addr gives nothing back, or "" when
// it may: known callers (tokens, or client certificates), or loopback.
func PortRefusal(addr string, known bool) string {
	if known || Loopback(addr) {
		return ""
	}
	return "giving budget back (Reset, refunds, negative hits) needs a token: this port (" + addr + ") is bound beyond loopback and the server has no --auth-token-file; " +
		"start it with --auth-token-file (a token with the admin role may Reset, one with the refund or admin role may refund), or bind the port to 127.0.0.1"
}

// Loopback reports whether the host of a listen address host:port is
// a loopback address or "localhost". An empty host (every address), an
// unspecified one and any other name are not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
