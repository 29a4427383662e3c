package api

import (
	"context"
	"errors"
	"github.com/floodgate/floodgate/internal/keys"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/algorithms"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/store"
	"github.com/floodgate/floodgate/internal/store/localshare"
)

// Defaults for Settings' zero values.
const (
	DefaultMaxKeyBytes = 4096
	defaultMaxBatch    = 128
	// degradedRetryAfter is the Retry-After of a limit that failed closed:
	// about when the store is probed again.
	degradedRetryAfter = time.Second
)

// Settings are the RateLimiter's optional knobs. The zero value is usable.
type Settings struct {
	// Config supplies named policies; nil means no config file, so every
	// policy name is unknown.
	Rules RuleSource
	// MaxKeyBytes bounds a key's length. 0 means DefaultMaxKeyBytes.
	MaxKeyBytes int
	// MaxBatch bounds the checks in one CheckBatch. 0 means defaultMaxBatch.
	MaxBatch int
	// FailureMode applies to inline limits and to policies that do not set
	// one: what to answer when the store cannot decide. The zero value
	// (rules.FailureDefault) means open.
	FailureMode rules.FailureMode
	// Local decides the limits whose failure mode is local while the store
	// cannot decide: the replica's share of each limit, in its memory. The
	// server gives both APIs the same one. nil means a share of its own
	// with the whole limit (one replica).
	Local *localshare.Share
	// Clock reads the time, once per request. nil means time.Now.
	Clock func() time.Time
	// Logger receives internal errors. nil means slog.Default().
	Logger *slog.Logger
	// Metrics counts decisions; nil counts nothing.
	Metrics *observability.Metrics
	// API is the api label of its decisions in the metrics and its store
	// failure logs: which front door asked. "" means observability.APICheck (gRPC); the
	// HTTP/JSON API's RateLimiter has observability.APIHTTP.
	API string
	// Tracer starts the spans of matching and of the store call, children
	// of the call's span when that one is recording. nil traces nothing.
	Tracer trace.Tracer
	// TraceValues puts the checks' keys into the spans (off by default:
	// keys can be personal data).
	TraceValues bool
}

// RuleSource gives the current configuration. *rules.Watcher is one.
type RuleSource interface {
	Current() *rules.Set
}

// RateLimiter serves floodgate.v1.RateLimiter.
type RateLimiter struct {
	floodgatev1.UnimplementedRateLimiterServer

	store       store.Store
	cfg         RuleSource
	maxKey      int
	maxBatch    int
	failureMode rules.FailureMode
	local       *localshare.Share
	clock       func() time.Time
	log         *slog.Logger
	metrics     *observability.Metrics
	api         string
	failures    *observability.FailureLog
	tracer      spanTracer
}

var _ floodgatev1.RateLimiterServer = (*RateLimiter)(nil)

// NewRateLimiter returns the Check API served from st.
func NewRateLimiter(st store.Store, s Settings) *RateLimiter {
	r := &RateLimiter{
		store:       st,
		cfg:         s.Rules,
		maxKey:      orDefault(s.MaxKeyBytes, DefaultMaxKeyBytes),
		maxBatch:    orDefault(s.MaxBatch, defaultMaxBatch),
		failureMode: s.FailureMode,
		local:       localOrDefault(s.Local),
		clock:       s.Clock,
		log:         s.Logger,
		metrics:     s.Metrics,
		api:         s.API,
		tracer:      spanTracer{tracer: s.Tracer, values: s.TraceValues},
	}
	if r.api == "" {
		r.api = observability.APICheck
	}
	if r.failureMode == rules.FailureDefault {
		r.failureMode = rules.FailureOpen
	}
	if r.clock == nil {
		r.clock = time.Now
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.failures = observability.NewFailureLog(r.log, r.api)
	return r
}

// check is a validated check: what to ask the store, and how to answer.
type check struct {
	req         store.Request
	failureMode rules.FailureMode
	shadow      bool
	rule        string // the metrics label: the policy's name, or "inline"
}

// checkFields are the fields CheckRequest and PeekRequest share.
type checkFields interface {
	GetKey() string
	GetAlgorithm() floodgatev1.Algorithm
	GetCost() int64
	GetLimit() *floodgatev1.Limit
	GetPolicy() string
}

// Check implements floodgate.v1.RateLimiter/Check.
func (r *RateLimiter) Check(ctx context.Context, req *floodgatev1.CheckRequest) (*floodgatev1.CheckResponse, error) {
	c, err := r.resolveTraced(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	b := new(oneDecision) // goes to the store: on the heap, as one block
	degraded, err := r.decide(ctx, []check{c}, b.reqs[:], b.out[:])
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	return checkResponse(c, b.out[0], degraded), nil
}

// CheckBatch implements floodgate.v1.RateLimiter/CheckBatch: all or nothing.
func (r *RateLimiter) CheckBatch(ctx context.Context, req *floodgatev1.CheckBatchRequest) (*floodgatev1.CheckBatchResponse, error) {
	n := len(req.GetChecks())
	switch {
	case n == 0:
		return nil, toStatus(ctx, r.log, invalidf("checks", "must hold at least one check"))
	case n > r.maxBatch:
		return nil, toStatus(ctx, r.log, invalidf("checks", "%d checks exceed the limit of %d per batch", n, r.maxBatch))
	}
	checks := make([]check, n)
	_, span := r.tracer.start(ctx, spanMatch)
	for i, cr := range req.GetChecks() {
		c, err := r.resolve(cr)
		if err != nil {
			err = within(fmtIndex("checks", i), err)
			if span != nil {
				r.tracer.endCheckMatch(span, checks[:i], requestKeys(req), err)
			}
			return nil, toStatus(ctx, r.log, err)
		}
		checks[i] = c
	}
	if span != nil {
		r.tracer.endCheckMatch(span, checks, requestKeys(req), nil)
	}
	out := make([]algorithms.Decision, n)
	degraded, err := r.decide(ctx, checks, make([]store.Request, n), out)
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	resp := &floodgatev1.CheckBatchResponse{Allowed: true, Results: make([]*floodgatev1.CheckResponse, n)}
	for i, c := range checks {
		resp.Results[i] = checkResponse(c, out[i], degraded)
		if !resp.Results[i].Allowed {
			resp.Allowed = false
		}
	}
	return resp, nil
}

// Peek implements floodgate.v1.RateLimiter/Peek: a Check that charges nothing.
func (r *RateLimiter) Peek(ctx context.Context, req *floodgatev1.PeekRequest) (*floodgatev1.PeekResponse, error) {
	c, err := r.resolveTraced(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	// One store call, two looks: what is spendable now (cost 0), and
	// whether this cost would pass (a dry run).
	now := c
	now.req.Cost = 0
	c.req.DryRun = true
	var reqs [2]store.Request
	var out [2]algorithms.Decision
	degraded, err := r.decide(ctx, []check{now, c}, reqs[:], out[:])
	if err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	cr := checkResponse(c, out[1], degraded)
	return &floodgatev1.PeekResponse{
		Allowed:    cr.Allowed,
		Limit:      cr.Limit,
		Remaining:  out[0].Remaining,
		RetryAfter: cr.RetryAfter,
		ResetAfter: durationpb.New(out[0].ResetAfter),
		Degraded:   cr.Degraded,
	}, nil
}

// Reset implements floodgate.v1.RateLimiter/Reset. With a limit or a
// policy it forgets that one count of the key; without, every count of
// the key, whatever limit made it (the store finds them by key).
func (r *RateLimiter) Reset(ctx context.Context, req *floodgatev1.ResetRequest) (*floodgatev1.ResetResponse, error) {
	if err := r.validateKey(req.GetKey()); err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	alg := algorithms.Algorithm(req.GetAlgorithm())
	if alg != algorithms.Unspecified && !alg.Valid() {
		return nil, toStatus(ctx, r.log, invalidf("algorithm", "unknown value %d", int32(alg)))
	}
	var scopes []string
	switch {
	case req.GetPolicy() != "":
		p, err := r.policy(req.GetPolicy())
		if err != nil {
			return nil, toStatus(ctx, r.log, err)
		}
		if alg != algorithms.Unspecified && alg != p.Rate.Algorithm {
			return nil, toStatus(ctx, r.log, invalidf("algorithm", "%v does not match policy %q, which uses %v; leave algorithm unset", alg, p.Name, p.Rate.Algorithm))
		}
		alg, scopes = p.Rate.Algorithm, []string{policyScope(p.Name)}
	case req.GetLimit() != nil:
		if alg == algorithms.Unspecified {
			return nil, toStatus(ctx, r.log, invalidf("algorithm", "required with an inline limit"))
		}
		l, err := inlineLimit(alg, req.GetLimit())
		if err != nil {
			return nil, toStatus(ctx, r.log, err)
		}
		scopes = []string{inlineScope(l)}
	}
	if err := r.store.Reset(ctx, alg, keys.Check(req.GetKey()), scopes...); err != nil {
		return nil, toStatus(ctx, r.log, err)
	}
	return &floodgatev1.ResetResponse{}, nil
}

// policyScope is the store scope of a policy's count: its name, so that a
// policy whose numbers change on a config reload keeps the key's count (a
// tier's limit raised or lowered applies to what was already spent), while
// two policies on one key (login and otp on a user) never share one.
func policyScope(name string) string { return "p" + name }

// inlineScope is the store scope of an inline limit's count: its numbers
// (the algorithm is in the store key already), so that two inline limits
// on one key never share a count, whatever order callers interleave them.
// It is short, since it lengthens every Redis key of the limit: requests,
// the period in its largest whole unit, and the burst when set, e.g.
// "i100/1m" or "i10/90s/50".
func inlineScope(l algorithms.Limit) string {
	var buf [48]byte // room for "i" and the numbers: one allocation, the string
	b := append(buf[:0], 'i')
	b = strconv.AppendInt(b, l.Requests, 10)
	b = append(b, '/')
	ms := l.PeriodMs()
	switch {
	case ms%3_600_000 == 0:
		b = append(strconv.AppendInt(b, ms/3_600_000, 10), 'h')
	case ms%60_000 == 0:
		b = append(strconv.AppendInt(b, ms/60_000, 10), 'm')
	case ms%1000 == 0:
		b = append(strconv.AppendInt(b, ms/1000, 10), 's')
	default:
		b = append(strconv.AppendInt(b, ms, 10), "ms"...)
	}
	if l.Burst > 0 {
		b = append(b, '/')
		b = strconv.AppendInt(b, l.Burst, 10)
	}
	return string(b)
}

// resolveTraced is resolve in a match span, when the call is traced.
func (r *RateLimiter) resolveTraced(ctx context.Context, req checkFields) (check, error) {
	_, span := r.tracer.start(ctx, spanMatch)
	c, err := r.resolve(req)
	if span != nil {
		var checks []check
		if err == nil {
			checks = []check{c}
		}
		r.tracer.endCheckMatch(span, checks, []string{req.GetKey()}, err)
	}
	return c, err
}

// requestKeys are the keys of a batch's checks.
func requestKeys(req *floodgatev1.CheckBatchRequest) []string {
	ks := make([]string, len(req.GetChecks()))
	for i, c := range req.GetChecks() {
		ks[i] = c.GetKey()
	}
	return ks
}

// resolve validates a check and finds its limit.
func (r *RateLimiter) resolve(req checkFields) (check, error) {
	if err := r.validateKey(req.GetKey()); err != nil {
		return check{}, err
	}
	cost := req.GetCost()
	switch {
	case cost < 0:
		return check{}, invalidf("cost", "must not be negative, got %d", cost)
	case cost == 0:
		cost = 1
	}
	alg := algorithms.Algorithm(req.GetAlgorithm())
	if alg != algorithms.Unspecified && !alg.Valid() {
		return check{}, invalidf("algorithm", "unknown value %d", int32(alg))
	}

	c := check{failureMode: r.failureMode}
	switch {
	case req.GetPolicy() != "":
		p, err := r.policy(req.GetPolicy())
		if err != nil {
			return check{}, err
		}
		if alg != algorithms.Unspecified && alg != p.Rate.Algorithm {
			return check{}, invalidf("algorithm", "%v does not match policy %q, which uses %v; leave algorithm unset", alg, p.Name, p.Rate.Algorithm)
		}
		c.req.Limit = p.Rate
		c.req.Scope = policyScope(p.Name)
		c.shadow = p.ShadowMode
		c.rule = p.Name
		if p.FailureMode != rules.FailureDefault {
			c.failureMode = p.FailureMode
		}
	case req.GetLimit() != nil:
		if alg == algorithms.Unspecified {
			return check{}, invalidf("algorithm", "required with an inline limit (ALGORITHM_TOKEN_BUCKET, ALGORITHM_SLIDING_WINDOW, ALGORITHM_SLIDING_WINDOW_LOG or ALGORITHM_FIXED_WINDOW)")
		}
		l, err := inlineLimit(alg, req.GetLimit())
		if err != nil {
			return check{}, err
		}
		c.req.Limit = l
		c.req.Scope = inlineScope(l)
		c.rule = "inline"
	default:
		return check{}, invalidf("limit", "one of limit or policy is required")
	}
	if capacity := c.req.Limit.Capacity(); cost > capacity {
		what := "requests"
		if c.req.Limit.Algorithm == algorithms.TokenBucket {
			what = "burst"
		}
		return check{}, invalidf("cost", "%d exceeds the limit's capacity of %d (%s), so it could never be allowed", cost, capacity, what)
	}
	c.req.Key = keys.Check(req.GetKey())
	c.req.Cost = cost
	return c, nil
}

func (r *RateLimiter) validateKey(key string) error {
	switch {
	case key == "":
		return invalidf("key", "must not be empty")
	case len(key) > r.maxKey:
		return invalidf("key", "%d bytes exceed the limit of %d", len(key), r.maxKey)
	}
	return nil
}

func (r *RateLimiter) policy(name string) (rules.Policy, error) {
	var cfg *rules.Set
	if r.cfg != nil {
		cfg = r.cfg.Current()
	}
	if cfg != nil {
		if p, ok := cfg.Policy(name); ok {
			return p, nil
		}
	}
	return rules.Policy{}, &fieldError{field: "policy", msg: "unknown policy " + quote(name), kind: errNotFound}
}

// inlineLimit converts and validates an inline limit, naming the field.
func inlineLimit(alg algorithms.Algorithm, pl *floodgatev1.Limit) (algorithms.Limit, error) {
	if pl.GetRequests() <= 0 {
		return algorithms.Limit{}, invalidf("limit.requests", "must be positive, got %d", pl.GetRequests())
	}
	if pl.GetPeriod() == nil {
		return algorithms.Limit{}, invalidf("limit.period", "required, e.g. \"60s\"")
	}
	if err := pl.GetPeriod().CheckValid(); err != nil {
		return algorithms.Limit{}, invalidf("limit.period", "%v", err)
	}
	period := pl.GetPeriod().AsDuration()
	switch {
	case period <= 0:
		return algorithms.Limit{}, invalidf("limit.period", "must be positive, got %v", period)
	case period%time.Millisecond != 0:
		return algorithms.Limit{}, invalidf("limit.period", "must be a whole number of milliseconds, got %v", period)
	case pl.GetBurst() < 0:
		return algorithms.Limit{}, invalidf("limit.burst", "must not be negative, got %d", pl.GetBurst())
	case pl.GetBurst() > 0 && alg != algorithms.TokenBucket:
		return algorithms.Limit{}, invalidf("limit.burst", "applies only to ALGORITHM_TOKEN_BUCKET, not %v", alg)
	}
	l := algorithms.Limit{Algorithm: alg, Requests: pl.GetRequests(), Period: period, Burst: pl.GetBurst()}
	if err := l.Validate(); err != nil {
		return algorithms.Limit{}, invalidf("limit", "%s", strings.TrimPrefix(err.Error(), algorithms.ErrInvalidLimit.Error()+": "))
	}
	return l, nil
}

// oneDecision holds the store request and decision of a Check, allocated
// as one block.
type oneDecision struct {
	reqs [1]store.Request
	out  [1]algorithms.Decision
}

// decide asks the store, reading the clock once. reqs is a buffer of
// len(checks) for the store requests. When the store cannot
// decide, each check's failure mode answers (degraded): open allows, closed
// denies, local decides with the replica's share (failedDecisions). A
// request whose own context ended gets that error.
func (r *RateLimiter) decide(ctx context.Context, checks []check, reqs []store.Request, out []algorithms.Decision) (degraded bool, err error) {
	reqs = reqs[:len(checks)]
	for i := range checks {
		reqs[i] = checks[i].req
	}
	now := r.clock()
	sctx, span := r.tracer.start(ctx, spanStore)
	err = r.store.Decide(sctx, now, reqs, out)
	if err == nil {
		r.failures.OK(ctx, now)
		r.observe(checks, out, false)
		if span != nil {
			endCheckStore(span, checks, out, false, nil)
		}
		return false, nil
	}
	if ctx.Err() != nil || errors.Is(err, store.ErrInvalid) {
		if span != nil {
			endCheckStore(span, checks, nil, false, err)
		}
		return false, err
	}
	r.failures.Failed(ctx, now, err) // logs transitions and summaries, not each decision
	modes := make([]rules.FailureMode, len(checks))
	for i, c := range checks {
		modes[i] = c.failureMode
	}
	failedDecisions(ctx, r.local, now, reqs, modes, out)
	r.observe(checks, out, true)
	if span != nil {
		endCheckStore(span, checks, out, true, err)
	}
	return true, nil
}

// observe counts decisions in the metrics. Peeks count nothing.
func (r *RateLimiter) observe(checks []check, out []algorithms.Decision, degraded bool) {
	if r.metrics == nil {
		return
	}
	for i := range checks {
		c := &checks[i]
		if c.req.DryRun || c.req.Cost <= 0 {
			continue
		}
		res := result(out[i].Allowed, c.shadow, degraded, c.failureMode == rules.FailureLocal)
		r.metrics.ObserveDecision(r.api, "", c.rule, c.req.Limit.Algorithm, res, observability.NearLimit(out[i]))
	}
}

// result is the metrics label of a decision; local says a degraded one
// was decided by the replica's local share.
func result(allowed, shadow, degraded, local bool) string {
	switch {
	case degraded && local:
		return observability.ResultLocal
	case degraded:
		return observability.ResultDegraded
	case allowed:
		return observability.ResultAllowed
	case shadow:
		return observability.ResultShadowDenied
	}
	return observability.ResultDenied
}

// failedDecision is the answer to r when the store could not decide: open
// allows, closed denies what would spend (retry after degradedRetryAfter).
func failedDecision(r store.Request, mode rules.FailureMode) algorithms.Decision {
	d := algorithms.Decision{Allowed: true, Limit: r.Limit.Capacity()}
	if mode == rules.FailureClosed && r.Cost > 0 {
		d.Allowed, d.RetryAfter = false, degradedRetryAfter
	}
	return d
}

// orDefault is v, or def when v is not positive.
func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// checkResponse builds the answer to one check. Shadow mode turns a deny
// into an allow (the deny is still decided and counted in metrics).
func checkResponse(c check, d algorithms.Decision, degraded bool) *floodgatev1.CheckResponse {
	// The response and its two durations as one block (as durationpb.New).
	b := new(checkResponseBlock)
	resp := &b.resp
	resp.Allowed = d.Allowed || c.shadow
	resp.Limit = d.Limit
	resp.Remaining = d.Remaining
	resp.Degraded = degraded
	b.reset.Seconds, b.reset.Nanos = int64(d.ResetAfter/time.Second), int32(d.ResetAfter%time.Second)
	resp.ResetAfter = &b.reset
	if !resp.Allowed {
		retry := max(d.RetryAfter, 0)
		b.retry.Seconds, b.retry.Nanos = int64(retry/time.Second), int32(retry%time.Second)
	}
	resp.RetryAfter = &b.retry
	return resp
}

// checkResponseBlock is a CheckResponse with its durations.
type checkResponseBlock struct {
	resp         floodgatev1.CheckResponse
	reset, retry durationpb.Duration
}
