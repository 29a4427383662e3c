// Package giveback is the one rule for everything that gives budget back,
// so that a limit holds whichever door a caller takes: Reset (forgets a
// key's counts), refunds (a Check's negative cost, a Settle whose actual
// is below what it reserved) and Envoy's negative hits
// (is_negative_hits). Every front door asks Allowed before it gives
// anything back; none decides by itself.
//
// The rule, with one default and one refusal for every kind:
//
//   - A port bound beyond loopback on a server with no tokens (and, on
//     gRPC, no client certificates) gives nothing back: nothing there
//     tells an operator from anyone who reaches the port. cmd/floodgate
//     puts that port's refusal into each call's context (WithRefusal).
//   - With tokens (--auth-token-file), the call's token needs a role: the
//     admin role may give back every way; the refund role may refund
//     (negative cost, settle refunds, negative hits) but not Reset.
//   - Otherwise (a loopback port without tokens, or a gRPC port whose
//     peers all hold client certificates) it is allowed.
//
// A refused give-back is answered PermissionDenied on the Check API and
// over HTTP; on Envoy's API, where an error answer lets the request
// through, it is decided as if its hits were 0 (server.Envoy).
package giveback

import (
	"context"
	"errors"

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

// PortRefusal is the refusal of a port: why a port bound to addr (a
// --grpc-addr or --http-addr) gives nothing back, or "" when it may: the
// server has tokens (or, on gRPC, client certificates: known), or the
// port is bound to loopback, where only this host's processes reach it.
func PortRefusal(addr string, known bool) string {
	if known || Loopback(addr) {
		return ""
	}
	return "giving budget back (Reset, refunds, negative hits) needs a token: this port (" + addr + ") is bound beyond loopback and the server has no --auth-token-file; " +
		"start it with --auth-token-file (a token with the admin role may Reset, one with the refund or admin role may refund), or bind the port to 127.0.0.1"
}
