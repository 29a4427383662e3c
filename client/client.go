package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/hostcheck"
)

// DefaultTimeout bounds each call when no WithTimeout option is given. A
// rate-limit decision sits on the caller's request path, so it must answer
// fast or not at all; the middleware and interceptors then apply their
// failure mode.
const DefaultTimeout = 100 * time.Millisecond

// Limit says which limit a check spends against: either inline (Algorithm,
// Requests per Period, Burst) or a named policy from the server's config
// (Policy, see the Policy function). Setting both Policy and Requests is an
// error.
type Limit struct {
	// Algorithm counts the requests, one of algorithms.All. Required for
	// an inline limit; with a policy, algorithms.Unspecified (the zero
	// value) uses the policy's (any other value must match it).
	Algorithm algorithms.Algorithm
	// Requests admitted per Period.
	Requests int64
	// Period is the window (or refill period), in whole milliseconds.
	Period time.Duration
	// Burst is the capacity of an algorithm that takes one
	// (algorithms.Facts.Burst): a bucket's, or the queue size of one that
	// waits (the most requests that may wait); 0 means Requests.
	Burst int64
	// Calendar, when set, makes the window a calendar period of TimeZone
	// (e.g. algorithms.Month: Requests per calendar month, resetting at local
	// midnight on the 1st) instead of Period, which must then be 0. Only
	// an algorithm that counts in windows (algorithms.Facts.Window) takes
	// one.
	Calendar algorithms.Calendar
	// TimeZone is Calendar's IANA time zone, e.g. "Asia/Jakarta"; ""
	// means UTC.
	TimeZone string
	// WarnAt is the warning threshold (the soft limit) in units: a check
	// that leaves at least this many of the capacity (Burst for a bucket,
	// Requests for a window) used answers Decision.Warning. 0 means none;
	// at most the capacity. Set WarnAt or WarnAtPercent, not both; a
	// policy carries its own (warn_at in the server's config).
	WarnAt int64
	// WarnAtPercent is the warning threshold as a whole percentage of the
	// capacity, 1 to 100; 0 means none.
	WarnAtPercent int32
	// Policy names a policy in the server's config, e.g. "free".
	Policy string
}

// Policy is the limit of the server-side policy called name, e.g.
// client.Policy("login").
func Policy(name string) Limit { return Limit{Policy: name} }

// errBothSources is returned for a Limit with both a policy and requests,
// with the code floodgate gives every other invalid limit.
var errBothSources = status.Error(codes.InvalidArgument, "limit sets both a policy and requests; choose one")

func (l Limit) source() (floodgatev1.Algorithm, *floodgatev1.Limit, string, error) {
	alg := floodgatev1.Algorithm(l.Algorithm)
	if l.Policy != "" {
		if l.Requests != 0 || l.Period != 0 || l.Burst != 0 || l.Calendar != algorithms.NoCalendar || l.TimeZone != "" || l.WarnAt != 0 || l.WarnAtPercent != 0 {
			return 0, nil, "", errBothSources
		}
		return alg, nil, l.Policy, nil
	}
	inline := &floodgatev1.Limit{Requests: l.Requests, Burst: l.Burst, Calendar: floodgatev1.Calendar(l.Calendar), TimeZone: l.TimeZone,
		WarnAt: l.WarnAt, WarnAtPercent: l.WarnAtPercent}
	if l.Period != 0 || l.Calendar == algorithms.NoCalendar {
		inline.Period = durationpb.New(l.Period)
	}
	return alg, inline, "", nil
}

func (l Limit) checkRequest(key string, cost int64) (*floodgatev1.CheckRequest, error) {
	alg, inline, policy, err := l.source()
	if err != nil {
		return nil, err
	}
	req := &floodgatev1.CheckRequest{Key: key, Algorithm: alg, Cost: cost}
	req.Source = &floodgatev1.CheckRequest_Policy{Policy: policy}
	if inline != nil {
		req.Source = &floodgatev1.CheckRequest_Limit{Limit: inline}
	}
	return req, nil
}

// Decision is floodgate's answer to a check.
//
// For example, with 3 requests per minute in a bucket, the first
// check answers Allowed, Limit 3, Remaining 2, RetryAfter 0, ResetAfter 20s
// (one token takes 20s to come back); the fourth check in the same instant
// answers not Allowed, Remaining 0, RetryAfter 20s, ResetAfter 1m.
type Decision struct {
	// Allowed says the whole cost was admitted and charged (for Peek: would
	// be).
	Allowed bool
	// Limit is the capacity that applied: requests per period, or a
	// bucket's burst.
	Limit int64
	// Remaining is how many units can still be spent now.
	Remaining int64
	// RetryAfter is 0 when allowed; otherwise the exact wait until the cost
	// would pass (a cost above a replica's local share while floodgate's
	// store is down: until the limit's period ends), or negative when no
	// wait lets it through (Wait returns ErrNeverAdmitted).
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full limit.
	ResetAfter time.Duration
	// Wait is the answer of an algorithm that waits: how long the
	// admitted request must wait before it starts (its slot); 0 when it
	// may start now, and for every other algorithm. For Peek, the wait a Check would get.
	Wait time.Duration
	// Degraded says floodgate's store could not decide and the limit's
	// failure mode answered: allowed (open; Redis may or may not have
	// counted it) or denied (closed; not counted).
	Degraded bool
	// Warning says the check was allowed and the key's usage (Limit −
	// Remaining) has reached the limit's warning threshold, WarnAt: the
	// soft limit, a sign to slow down before checks are denied. Never set
	// on a denied or degraded decision. For Peek: a Check would warn.
	Warning bool
	// WarnAt is the limit's warning threshold in units of Limit; 0 when
	// the limit has none.
	WarnAt int64
}

// decisionFields are the fields CheckResponse and PeekResponse share.
type decisionFields interface {
	GetAllowed() bool
	GetLimit() int64
	GetRemaining() int64
	GetRetryAfter() *durationpb.Duration
	GetResetAfter() *durationpb.Duration
	GetDegraded() bool
	GetWait() *durationpb.Duration
	GetWarning() bool
	GetWarnAt() int64
}

func decisionOf(r decisionFields) Decision {
	return Decision{
		Allowed:    r.GetAllowed(),
		Limit:      r.GetLimit(),
		Remaining:  r.GetRemaining(),
		RetryAfter: r.GetRetryAfter().AsDuration(),
		ResetAfter: r.GetResetAfter().AsDuration(),
		Wait:       r.GetWait().AsDuration(),
		Degraded:   r.GetDegraded(),
		Warning:    r.GetWarning(),
		WarnAt:     r.GetWarnAt(),
	}
}

// Request is one check: for Check and Peek, or one of a CheckBatch.
type Request struct {
	// Key is the thing being limited, e.g. "user:42".
	Key string
	// Limit is the limit to spend against.
	Limit Limit
	// Cost is the units to spend, e.g. 10 for a bulk export counting as
	// ten requests; 0 means 1.
	Cost int64
}

// BatchDecision is the answer to CheckBatch.
type BatchDecision struct {
	// Allowed says every check was admitted. When false nothing was charged.
	Allowed bool
	// Decisions holds one decision per request, in order. When the batch is
	// denied, each still says whether that check alone would have fitted.
	Decisions []Decision
}

// Client calls floodgate.v1.RateLimiter. It is safe for concurrent use.
type Client struct {
	rl       floodgatev1.RateLimiterClient
	conn     *grpc.ClientConn // owned; nil when made by New
	timeout  time.Duration
	callOpts []grpc.CallOption // on every call: New's token
}

// Dial returns a client of the floodgate at addr ("host:port", or any gRPC
// target such as "dns:///floodgate:8081"). It does not wait for a
// connection: the first call connects, and fails fast if it cannot. Close
// the client when done.
func Dial(addr string, opts ...DialOption) (*Client, error) {
	o, err := newDialOptions(opts)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// A Check whose reply was lost may already have been charged: a
		// retry would charge it twice, even one a resolver's service config
		// asks for. Transparent retries (the call never reached the
		// server) stay on: they cannot charge twice.
		grpc.WithDisableRetry(),
	}
	if o.token != "" {
		if o.tls == nil && !hostcheck.LoopbackTarget(addr) {
			return nil, fmt.Errorf("floodgate client: a bearer token needs WithTLS unless %q is a loopback address", addr)
		}
		dopts = append(dopts, grpc.WithPerRPCCredentials(bearer{token: o.token, secure: o.tls != nil}))
	}
	conn, err := grpc.NewClient(addr, append(dopts, o.grpcOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("floodgate client: %w", err)
	}
	return &Client{rl: floodgatev1.NewRateLimiterClient(conn), conn: conn, timeout: o.timeout}, nil
}

// New returns a client on an existing connection, which the caller keeps
// owning (Close does not close it). It takes the Options WithTimeout and
// WithToken; TLS, dial options and retries belong to conn. The token is
// sent per call and requires transport security unless conn's target is a
// loopback address or a unix socket (gRPC fails such a call with
// Unauthenticated).
func New(conn grpc.ClientConnInterface, opts ...Option) (*Client, error) {
	o, err := newCallOptions(opts)
	if err != nil {
		return nil, err
	}
	c := &Client{rl: floodgatev1.NewRateLimiterClient(conn), timeout: o.timeout}
	if o.token != "" {
		secure := true
		if t, ok := conn.(interface{ Target() string }); ok {
			secure = !hostcheck.LoopbackTarget(t.Target())
		}
		c.callOpts = []grpc.CallOption{grpc.PerRPCCredentials(bearer{token: o.token, secure: secure})}
	}
	return c, nil
}

// WithTimeout returns a client that shares c's connection and token but
// bounds each call by d instead of c's timeout (d <= 0: by the context
// alone), e.g. for a middleware with a timeout of its own. Close c, not
// the copy: the copy's Close does nothing.
func (c *Client) WithTimeout(d time.Duration) *Client {
	cp := *c
	cp.conn = nil
	cp.timeout = d
	return &cp
}

// Close closes the connection Dial opened; for a client made by New, or
// a WithTimeout copy, it does nothing.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// call runs rpc on req with c's call options, bounded by c's timeout
// when it is positive.
func call[Req, Resp any](ctx context.Context, c *Client, rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	return rpc(ctx, req, c.callOpts...)
}

// Check spends r.Cost (default 1) against r.Key's limit, if the whole
// cost fits. Being over the limit is a Decision with Allowed false, not an
// error; errors mean floodgate could not decide, and wrap the gRPC status
// (status.Code(err) gives InvalidArgument, NotFound for an unknown policy,
// Unavailable, DeadlineExceeded, ...).
func (c *Client) Check(ctx context.Context, r Request) (Decision, error) {
	req, err := r.Limit.checkRequest(r.Key, r.Cost)
	if err != nil {
		return Decision{}, fmt.Errorf("floodgate check: %w", err)
	}
	resp, err := call(ctx, c, c.rl.Check, req)
	if err != nil {
		return Decision{}, fmt.Errorf("floodgate check: %w", err)
	}
	return decisionOf(resp), nil
}

// CheckBatch decides several checks together, all or nothing: if one is
// denied, none is charged. Use it to limit one request by several keys at
// once, e.g. per IP and per API key.
func (c *Client) CheckBatch(ctx context.Context, reqs ...Request) (BatchDecision, error) {
	in := &floodgatev1.CheckBatchRequest{Checks: make([]*floodgatev1.CheckRequest, len(reqs))}
	for i, r := range reqs {
		cr, err := r.Limit.checkRequest(r.Key, r.Cost)
		if err != nil {
			return BatchDecision{}, fmt.Errorf("floodgate check batch: request %d: %w", i, err)
		}
		in.Checks[i] = cr
	}
	resp, err := call(ctx, c, c.rl.CheckBatch, in)
	if err != nil {
		return BatchDecision{}, fmt.Errorf("floodgate check batch: %w", err)
	}
	out := BatchDecision{Allowed: resp.GetAllowed(), Decisions: make([]Decision, len(resp.GetResults()))}
	for i, r := range resp.GetResults() {
		out.Decisions[i] = decisionOf(r)
	}
	return out, nil
}

// Peek tells what Check would answer now, without charging anything:
// Remaining and ResetAfter describe the key as it is, Allowed and
// RetryAfter whether (and when) r.Cost would pass.
func (c *Client) Peek(ctx context.Context, r Request) (Decision, error) {
	alg, inline, policy, err := r.Limit.source()
	if err != nil {
		return Decision{}, fmt.Errorf("floodgate peek: %w", err)
	}
	req := &floodgatev1.PeekRequest{Key: r.Key, Algorithm: alg, Cost: r.Cost}
	req.Source = &floodgatev1.PeekRequest_Policy{Policy: policy}
	if inline != nil {
		req.Source = &floodgatev1.PeekRequest_Limit{Limit: inline}
	}
	resp, err := call(ctx, c, c.rl.Peek, req)
	if err != nil {
		return Decision{}, fmt.Errorf("floodgate peek: %w", err)
	}
	return decisionOf(resp), nil
}

// Reset forgets key under alg (algorithms.Unspecified: under every algorithm), every
// limit's count of it, so its next check starts from a full limit.
func (c *Client) Reset(ctx context.Context, key string, alg algorithms.Algorithm) error {
	if _, err := call(ctx, c, c.rl.Reset, &floodgatev1.ResetRequest{Key: key, Algorithm: floodgatev1.Algorithm(alg)}); err != nil {
		return fmt.Errorf("floodgate reset: %w", err)
	}
	return nil
}

// ResetLimit forgets key's count under one limit only (a policy, or an
// inline limit): a key holds one count per limit, and Reset forgets them
// all.
func (c *Client) ResetLimit(ctx context.Context, key string, limit Limit) error {
	alg, inline, policy, err := limit.source()
	if err != nil {
		return fmt.Errorf("floodgate reset: %w", err)
	}
	req := &floodgatev1.ResetRequest{Key: key, Algorithm: alg}
	req.Source = &floodgatev1.ResetRequest_Policy{Policy: policy}
	if inline != nil {
		req.Source = &floodgatev1.ResetRequest_Limit{Limit: inline}
	}
	if _, err := call(ctx, c, c.rl.Reset, req); err != nil {
		return fmt.Errorf("floodgate reset: %w", err)
	}
	return nil
}
