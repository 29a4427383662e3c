package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
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
)

// FailureMode says what a middleware or interceptor does when floodgate
// cannot decide (unreachable, too slow, or an error such as an unknown
// policy).
type FailureMode int

const (
	// FailOpen lets the call through unlimited. The zero value: an outage
	// of the limiter should not become an outage of the service.
	FailOpen FailureMode = iota
	// FailClosed rejects the call (gRPC Unavailable, HTTP 503). Use it where
	// an unlimited request is worse than none: login, OTP, payments.
	FailClosed
)

// Metadata keys the interceptors write, as headers on allowed calls and as
// trailers on denied ones. Times are whole seconds, rounded up, so a client
// never retries too early; the exact wait is in the RetryInfo detail.
const (
	MDLimit      = "ratelimit-limit"
	MDRemaining  = "ratelimit-remaining"
	MDReset      = "ratelimit-reset"
	MDRetryAfter = "retry-after"
	MDDegraded   = "ratelimit-degraded"
)

// KeyFunc names the rate-limit key of a gRPC call. An empty key means the
// call is not limited, so a KeyFunc can also exempt calls (health checks,
// internal batch jobs).
type KeyFunc func(ctx context.Context, fullMethod string) string

// KeyByMethod keys by the full method name, "method:/pkg.Service/Method":
// one shared limit per method.
func KeyByMethod(_ context.Context, fullMethod string) string { return "method:" + fullMethod }

// KeyByMetadata keys by the first value of an incoming metadata entry, e.g.
// KeyByMetadata("x-api-key"), or "" when the call has none. The value is
// hashed (SHA-256, 128 bits kept) so a secret never reaches floodgate's
// store or logs and an over-long value cannot exceed floodgate's key size.
func KeyByMetadata(name string) KeyFunc {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) string {
		md, _ := metadata.FromIncomingContext(ctx)
		vs := md.Get(name)
		if len(vs) == 0 || vs[0] == "" {
			return ""
		}
		return name + ":" + hashValue(vs[0])
	}
}

// KeyByPeer keys by the caller's IP address (the port is dropped: it
// changes with every connection), "peer:10.0.0.7", or "" when the call has
// no network peer.
func KeyByPeer(ctx context.Context, _ string) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	a := p.Addr.String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		a = host
	}
	if a == "" {
		return ""
	}
	return "peer:" + a
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
// gives each caller its own limit per method. If any part is empty the
// joined key is empty (the call is not limited), so wrap optional parts in
// KeyFirst with a fallback.
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

// InterceptorConfig configures the gRPC server interceptors.
type InterceptorConfig struct {
	// Limit is the limit every key spends against. Required.
	Limit Limit
	// Key names each call's key. nil means KeyByPeer.
	Key KeyFunc
	// KeyPrefix is put before every key, to keep this service's keys apart
	// from others' on a shared floodgate, e.g. "orders:".
	KeyPrefix string
	// FailureMode applies when floodgate cannot decide. The zero value is
	// FailOpen.
	FailureMode FailureMode
	// Timeout bounds the call to floodgate. 0 means the client's timeout.
	Timeout time.Duration
	// OnError, if set, is told every error from floodgate (before the
	// failure mode applies), e.g. to log or count it.
	OnError func(ctx context.Context, fullMethod string, err error)
}

// UnaryServerInterceptor limits each unary call: allowed calls get
// ratelimit-limit, -remaining and -reset headers; denied calls get
// codes.ResourceExhausted with an errdetails.RetryInfo holding the exact
// wait, and the same numbers plus retry-after as trailers; when floodgate
// cannot decide, cfg.FailureMode answers (closed: codes.Unavailable).
func UnaryServerInterceptor(c *Client, cfg InterceptorConfig) grpc.UnaryServerInterceptor {
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
func StreamServerInterceptor(c *Client, cfg InterceptorConfig) grpc.StreamServerInterceptor {
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
	c   *Client
	cfg InterceptorConfig
}

func newCallLimiter(c *Client, cfg InterceptorConfig) *callLimiter {
	if cfg.Key == nil {
		cfg.Key = KeyByPeer
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = c.timeout
	}
	return &callLimiter{c: c, cfg: cfg}
}

// decide asks floodgate about one call. It returns the metadata to send (nil
// when the call is not limited) and, when the call must not proceed, its
// error.
func (l *callLimiter) decide(ctx context.Context, fullMethod string) (metadata.MD, error) {
	key := l.cfg.Key(ctx, fullMethod)
	if key == "" {
		return nil, nil
	}
	d, err := l.c.check(ctx, l.cfg.Timeout, l.cfg.KeyPrefix+key, l.cfg.Limit)
	if err != nil {
		if ctx.Err() != nil { // the caller gave up; say so, not "unavailable"
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if l.cfg.OnError != nil {
			l.cfg.OnError(ctx, fullMethod, err)
		}
		if l.cfg.FailureMode == FailClosed {
			return nil, status.Error(codes.Unavailable, "rate limiter unavailable")
		}
		return nil, nil
	}
	md := metadata.Pairs(
		MDLimit, strconv.FormatInt(d.Limit, 10),
		MDRemaining, strconv.FormatInt(max(d.Remaining, 0), 10),
		MDReset, strconv.FormatInt(ceilSeconds(d.ResetAfter), 10),
	)
	if d.Degraded {
		md.Set(MDDegraded, "true")
	}
	if d.Allowed {
		return md, nil
	}
	md.Set(MDRetryAfter, strconv.FormatInt(ceilSeconds(d.RetryAfter), 10))
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("rate limited: retry after %v", d.RetryAfter))
	if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}); err == nil {
		st = withInfo
	}
	return md, st.Err()
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// hashValue is a short, stable digest of a secret, for keys.
func hashValue(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:16])
}
