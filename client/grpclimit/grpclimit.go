// Package grpclimit limits the calls of a gRPC service with floodgate:
// UnaryServerInterceptor and StreamServerInterceptor ask a client.Client
// about each call, keyed by a KeyFunc.
package grpclimit

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/keying"
	"github.com/floodgate/floodgate/client/internal/verdict"
	"github.com/floodgate/floodgate/internal/ratelimitheader"
)

// Metadata keys the interceptors write, as headers on allowed calls and as
// trailers on denied ones. Times are whole seconds, rounded up
// (ratelimitheader.Seconds), so a client never retries too early; the
// exact wait is in the RetryInfo detail.
const (
	MDLimit      = "ratelimit-limit"
	MDRemaining  = "ratelimit-remaining"
	MDReset      = "ratelimit-reset"
	MDRetryAfter = "retry-after"
	MDDegraded   = "ratelimit-degraded"
	// MDWarning is on an allowed call past the limit's warning threshold,
	// as RateLimit-Warning: `"name";at=800` (name "call" for an inline
	// limit).
	MDWarning = "ratelimit-warning"
)

// KeyFunc names the rate-limit key of a gRPC call, or "" when it has none
// (the call is then keyed by its peer; Config.Exempt exempts calls).
type KeyFunc func(ctx context.Context, fullMethod string) string

// KeyByMethod keys by the full method name, "method:/pkg.Service/Method":
// one shared limit per method.
func KeyByMethod(_ context.Context, fullMethod string) string { return "method:" + fullMethod }

// KeyByMetadata keys by the first value of an incoming metadata entry, e.g.
// KeyByMetadata("x-api-key"), or "" when it is missing or blank. The value
// is hashed, so a secret never reaches floodgate and its size is bounded.
// The caller writes it, so a call keyed by it is limited by its peer as
// well, unless Config.TrustMetadata.
func KeyByMetadata(name string) KeyFunc {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) string {
		md, _ := metadata.FromIncomingContext(ctx)
		vs := md.Get(name)
		if len(vs) == 0 || strings.TrimSpace(vs[0]) == "" {
			return ""
		}
		if n, ok := ctx.Value(keyNotesKey{}).(*keyNotes); ok {
			n.fromCaller = true
		}
		return name + ":" + keying.Hash(vs[0])
	}
}

// keyNotes is what the key functions tell the interceptors about a key,
// through the context they are called with.
type keyNotes struct {
	fromCaller bool // a KeyByMetadata value went into the key
}

type keyNotesKey struct{}

// KeyByPeer keys by the caller's IP address without port, "peer:10.0.0.7",
// or "" when the call has no network peer. An IPv6 address is cut to its
// /64 (a subscriber usually holds one); a peer that is no IP address is
// keyed as it is.
func KeyByPeer(ctx context.Context, _ string) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if a := keying.HostKey(p.Addr.String(), keying.DefaultIPv6Prefix); a != "" {
		return "peer:" + a
	}
	return ""
}

// KeyFirst uses the first non-empty key of fns: KeyFirst(KeyByMetadata(
// "x-api-key"), KeyByPeer) limits by API key, or by address for callers
// without one.
func KeyFirst(fns ...KeyFunc) KeyFunc {
	return func(ctx context.Context, m string) string {
		for _, f := range fns {
			if k := f(ctx, m); k != "" {
				return k
			}
		}
		return ""
	}
}

// KeyJoin joins the keys of fns with "|": KeyJoin(KeyByMethod, KeyByPeer)
// gives each caller its own limit per method. If any part is empty so is
// the joined key.
func KeyJoin(fns ...KeyFunc) KeyFunc {
	return func(ctx context.Context, m string) string {
		parts := make([]string, len(fns))
		for i, f := range fns {
			if parts[i] = f(ctx, m); parts[i] == "" {
				return ""
			}
		}
		return strings.Join(parts, "|")
	}
}

// Config configures the interceptors.
type Config struct {
	// Limit is the limit every key spends against. Required.
	Limit client.Limit
	// Key names each call's key. nil, or a "" key, means KeyByPeer, so a
	// missing API key never means unlimited. A key from KeyByMetadata is
	// also held to its peer's limit in one all-or-nothing batch.
	Key KeyFunc
	// TrustMetadata says an earlier interceptor verified the metadata
	// KeyByMetadata reads, so such calls are limited by their key alone.
	TrustMetadata bool
	// Exempt, if set, lets the calls it accepts through unlimited (health
	// checks, internal jobs), without asking floodgate.
	Exempt func(ctx context.Context, fullMethod string) bool
	// KeyPrefix is put before every key, to keep this service's keys apart
	// from others' on a shared floodgate, e.g. "orders:".
	KeyPrefix string
	// FailureMode applies when floodgate cannot decide; the zero value is
	// client.FailOpen, client.FailClosed fails with codes.Unavailable. A
	// configuration error fails with codes.Internal in either mode.
	FailureMode client.FailureMode
	// Timeout bounds the call to floodgate. 0 means the client's timeout.
	Timeout time.Duration
	// OnError, if set, is told every error from floodgate.
	OnError func(ctx context.Context, fullMethod string, err error)
	// Logger receives configuration errors, once each; nil: slog.Default().
	Logger *slog.Logger
}

// UnaryServerInterceptor limits each unary call: allowed calls get the MD*
// headers; denied calls fail with codes.ResourceExhausted carrying an
// errdetails.RetryInfo, with the same numbers and retry-after as trailers.
func UnaryServerInterceptor(c *client.Client, cfg Config) grpc.UnaryServerInterceptor {
	l := newCallLimiter(c, cfg)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, err := l.decide(ctx, info.FullMethod)
		if err != nil {
			if md != nil {
				_ = grpc.SetTrailer(ctx, md)
			}
			return nil, err
		}
		if md != nil {
			_ = grpc.SetHeader(ctx, md)
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor limits each stream once, when it opens, as
// UnaryServerInterceptor limits a unary call.
func StreamServerInterceptor(c *client.Client, cfg Config) grpc.StreamServerInterceptor {
	l := newCallLimiter(c, cfg)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, err := l.decide(ss.Context(), info.FullMethod)
		if err != nil {
			if md != nil {
				ss.SetTrailer(md)
			}
			return err
		}
		if md != nil {
			_ = ss.SetHeader(md)
		}
		return handler(srv, ss)
	}
}

type callLimiter struct {
	c       *client.Client // bounded by cfg.Timeout when set
	cfg     Config
	misconf *verdict.MisconfigLog
}

func newCallLimiter(c *client.Client, cfg Config) *callLimiter {
	if cfg.Key == nil {
		cfg.Key = KeyByPeer
	}
	if cfg.Timeout > 0 {
		c = c.WithTimeout(cfg.Timeout)
	}
	return &callLimiter{c: c, cfg: cfg, misconf: verdict.NewMisconfigLog(cfg.Logger)}
}

// unknownPeer keys the calls without a network peer, together.
const unknownPeer = "peer:unknown"

// decide asks floodgate about one call. It returns the metadata to send (nil
// when the call is not limited) and, when the call must not proceed, its
// error.
func (l *callLimiter) decide(ctx context.Context, fullMethod string) (metadata.MD, error) {
	if l.cfg.Exempt != nil && l.cfg.Exempt(ctx, fullMethod) {
		return nil, nil
	}
	d, err := l.check(ctx, fullMethod)
	if err != nil {
		if ctx.Err() != nil { // the caller gave up; say so, not "unavailable"
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if l.cfg.OnError != nil {
			l.cfg.OnError(ctx, fullMethod, err)
		}
		if verdict.IsConfigError(err) {
			l.misconf.Failed(ctx, fullMethod, err)
			return nil, status.Error(codes.Internal, "rate limiter misconfigured")
		}
		if l.cfg.FailureMode == client.FailClosed {
			return nil, status.Error(codes.Unavailable, "rate limiter unavailable")
		}
		return nil, nil
	}
	l.misconf.OK()
	md := metadata.Pairs(
		MDLimit, strconv.FormatInt(d.Limit, 10),
		MDRemaining, strconv.FormatInt(max(d.Remaining, 0), 10),
		MDReset, strconv.FormatInt(ratelimitheader.Seconds(d.ResetAfter), 10),
	)
	if d.Degraded {
		md.Set(MDDegraded, "true")
	}
	if d.Allowed {
		if d.Warning && !d.Degraded {
			md.Set(MDWarning, ratelimitheader.WarningMember(cmp.Or(l.cfg.Limit.Policy, "call"), d.WarnAt))
		}
		return md, nil
	}
	md.Set(MDRetryAfter, strconv.FormatInt(ratelimitheader.Seconds(d.RetryAfter), 10))
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("rate limited: retry after %v", d.RetryAfter))
	if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}); err == nil {
		st = withInfo
	}
	return md, st.Err()
}

// check keys one call and asks floodgate: by Key's key, falling back to
// the peer's; a key from caller-written metadata together with the peer's.
func (l *callLimiter) check(ctx context.Context, fullMethod string) (client.Decision, error) {
	var notes keyNotes
	key := l.cfg.Key(context.WithValue(ctx, keyNotesKey{}, &notes), fullMethod)
	peerKey := func() string { return cmp.Or(KeyByPeer(ctx, fullMethod), unknownPeer) }
	if key == "" {
		return l.c.Check(ctx, client.Request{Key: l.cfg.KeyPrefix + peerKey(), Limit: l.cfg.Limit})
	}
	if !notes.fromCaller || l.cfg.TrustMetadata {
		return l.c.Check(ctx, client.Request{Key: l.cfg.KeyPrefix + key, Limit: l.cfg.Limit})
	}
	b, err := l.c.CheckBatch(ctx,
		client.Request{Key: l.cfg.KeyPrefix + key, Limit: l.cfg.Limit},
		client.Request{Key: l.cfg.KeyPrefix + peerKey(), Limit: l.cfg.Limit})
	if err != nil {
		return client.Decision{}, err
	}
	d, _ := verdict.Combined(b)
	return d, nil
}
