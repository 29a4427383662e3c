package server

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/keys"
	"github.com/floodgate/floodgate/internal/localshare"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store"
)

// Bounds on the counts of an Envoy request that Envoy's route config
// controls, beyond which it is InvalidArgument (see Settings.MaxDescriptors).
const (
	DefaultMaxDescriptors = 64
	DefaultMaxEntries     = 32
)

// Envoy serves envoy.service.ratelimit.v3.RateLimitService, so Envoy's
// rate-limit filter can use floodgate in place of envoyproxy/ratelimit.
//
// Unlike the reference server it decides a request all or nothing: when
// one descriptor is over its limit, no other descriptor is charged.
type Envoy struct {
	rlsv3.UnimplementedRateLimitServiceServer

	store          store.Store
	cfg            RuleSource
	maxKey         int
	maxDescriptors int
	maxEntries     int
	failureMode    rules.FailureMode
	local          *localshare.Share
	shadow         bool
	headers        bool
	detailSeries   int
	noRefunds      bool
	clock          func() time.Time
	log            *slog.Logger
	metrics        *observability.Metrics
	failures       *observability.FailureLog
	tracer         spanTracer
	limits         atomic.Pointer[limitCache] // of the config last served
}

var _ rlsv3.RateLimitServiceServer = (*Envoy)(nil)

// NewEnvoy returns the Envoy rate-limit service deciding with st.
func NewEnvoy(st store.Store, s Settings) *Envoy {
	e := &Envoy{
		store:          st,
		cfg:            s.Rules,
		maxKey:         positiveOr(s.MaxKeyBytes, DefaultMaxKeyBytes),
		maxDescriptors: positiveOr(s.MaxDescriptors, DefaultMaxDescriptors),
		maxEntries:     positiveOr(s.MaxEntries, DefaultMaxEntries),
		failureMode:    s.FailureMode,
		local:          localOrDefault(s.Local),
		shadow:         s.ShadowMode,
		headers:        !s.NoHeaders,
		detailSeries:   s.DetailedMetricSeries,
		noRefunds:      s.NoRefunds,
		clock:          s.Clock,
		log:            s.Logger,
		metrics:        s.Metrics,
		tracer:         spanTracer{tracer: s.Tracer, values: s.TraceValues},
	}
	e.failureMode, e.clock, e.log = defaults(e.failureMode, e.clock, e.log)
	e.failures = observability.NewFailureLog(e.log, observability.APIEnvoy)
	return e
}

// envoyCheck is one limit to decide for one descriptor.
type envoyCheck struct {
	desc   int // index of the descriptor
	limit  *rules.Limit
	info   *limitInfo // limit's answer parts and metrics series
	req    store.Request
	shadow bool
	// fixed answers without the store: unlimited (allowed) or deny-all.
	fixed    bool
	decision algorithms.Decision
	degraded bool
	local    bool // degraded, and decided by the local share
}

// envoyInline is how many descriptors, limits and (twice as many)
// entries a request may have before its working memory grows beyond
// envoyWork.
const envoyInline = 4

// ShouldRateLimit implements envoy.service.ratelimit.v3.RateLimitService.
func (e *Envoy) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	// The request's working memory, one block on the heap: kept on the
	// stack, it would grow the handler goroutine's stack (a copy of the
	// whole stack, each request) deeper in the call.
	w := new(envoyWork)
	entries, err := e.validate(req, w.rows[:], w.ents[:])
	if err == nil {
		err = checkRefunds(ctx, req, e.noRefunds)
	}
	if err != nil {
		return nil, toStatus(ctx, e.log, err)
	}
	_, span := e.tracer.start(ctx, spanMatch)
	var cfg *rules.Set
	if e.cfg != nil {
		cfg = e.cfg.Current()
	}
	if cfg == nil || !cfg.HasDomain(req.GetDomain()) {
		if span != nil {
			e.tracer.endEnvoyMatch(span, req.GetDomain(), entries, nil)
		}
		return okResponse(len(entries)), nil
	}

	planned := e.plan(req, cfg, entries, w.matches[:], w.checks[:0])
	if span != nil {
		e.tracer.endEnvoyMatch(span, req.GetDomain(), entries, planned)
	}
	if err := e.decide(ctx, planned, w); err != nil {
		return nil, toStatus(ctx, e.log, err)
	}
	resp := e.answer(planned, len(entries))
	e.observe(req.GetDomain(), entries, planned)
	return resp, nil
}

// validate checks the request's shape and returns its descriptors as
// config entries, in rows and ents when they fit.
func (e *Envoy) validate(req *rlsv3.RateLimitRequest, rows [][]rules.Entry, ents []rules.Entry) ([][]rules.Entry, error) {
	switch {
	case req.GetDomain() == "":
		return nil, invalidf("domain", "must not be empty")
	case len(req.GetDomain()) > e.maxKey:
		return nil, invalidf("domain", "%d bytes exceed the limit of %d", len(req.GetDomain()), e.maxKey)
	case len(req.GetDescriptors()) == 0:
		return nil, invalidf("descriptors", "must hold at least one descriptor")
	case len(req.GetDescriptors()) > e.maxDescriptors:
		return nil, invalidf("descriptors", "%d descriptors exceed the limit of %d", len(req.GetDescriptors()), e.maxDescriptors)
	}
	descs := req.GetDescriptors()
	out := rows
	if len(descs) > len(out) {
		out = make([][]rules.Entry, len(descs))
	}
	out = out[:len(descs)]
	total := 0
	for _, d := range descs {
		total += len(d.GetEntries())
	}
	backing := ents[:0]
	if total > cap(backing) {
		backing = make([]rules.Entry, 0, min(total, e.maxDescriptors*e.maxEntries))
	}
	// Field names are built only on the error paths: they allocate.
	for i, d := range descs {
		switch n := len(d.GetEntries()); {
		case n == 0:
			return nil, invalidf(fmtIndex("descriptors", i)+".entries", "must hold at least one entry")
		case n > e.maxEntries:
			return nil, invalidf(fmtIndex("descriptors", i)+".entries", "%d entries exceed the limit of %d", n, e.maxEntries)
		}
		if l := d.GetLimit(); l != nil {
			if _, ok := unitPeriod(rlsv3.RateLimitResponse_RateLimit_Unit(l.GetUnit())); !ok {
				return nil, invalidf(fmtIndex("descriptors", i)+".limit.unit", "unknown unit %v", l.GetUnit())
			}
		}
		start := len(backing)
		for j, en := range d.GetEntries() {
			switch {
			case en.GetKey() == "":
				return nil, invalidf(entryField(i, j)+".key", "must not be empty")
			case len(en.GetKey()) > e.maxKey:
				return nil, invalidf(entryField(i, j)+".key", "%d bytes exceed the limit of %d", len(en.GetKey()), e.maxKey)
			case len(en.GetValue()) > e.maxKey:
				return nil, invalidf(entryField(i, j)+".value", "%d bytes exceed the limit of %d", len(en.GetValue()), e.maxKey)
			}
			backing = append(backing, rules.Entry{Key: en.GetKey(), Value: en.GetValue()})
		}
		out[i] = backing[start:len(backing):len(backing)]
	}
	return out, nil
}

// entryField is the field path of entry j of descriptor i.
func entryField(i, j int) string {
	return fmtIndex("descriptors", i) + "." + fmtIndex("entries", j)
}

// unitPeriod is the period of an Envoy unit (rules owns the table); ok is
// false for UNKNOWN and numbers the enum does not name.
func unitPeriod(u rlsv3.RateLimitResponse_RateLimit_Unit) (time.Duration, bool) {
	return rules.UnitPeriod(u.String())
}

// plan turns the request into the limits to decide.
// matches is a buffer for the matched limits, checks one to append the
// checks to.
func (e *Envoy) plan(req *rlsv3.RateLimitRequest, cfg *rules.Set, entries [][]rules.Entry, matches [][]*rules.Limit, checks []envoyCheck) []envoyCheck {
	if len(entries) > len(matches) {
		matches = make([][]*rules.Limit, len(entries))
	}
	matches = matches[:len(entries)]
	cfg.MatchRequestInto(matches, req.GetDomain(), entries)
	lc := e.limitCacheFor(cfg)
	var kb [128]byte // a key is built here, then copied into its string
	for i, d := range req.GetDescriptors() {
		cost := int64(max(req.GetHitsAddend(), 1))
		if h := d.GetHitsAddend(); h != nil {
			cost = int64(min(h.GetValue(), 1<<52))
		}
		if d.GetIsNegativeHits() {
			cost = -cost
		}
		if o := d.GetLimit(); o != nil {
			checks = append(checks, e.overrideCheck(i, req.GetDomain(), entries[i], o, cost))
			continue
		}
		for _, l := range matches[i] {
			c := envoyCheck{desc: i, limit: l, info: lc.info(l), shadow: e.shadow || l.ShadowMode}
			switch {
			case l.Unlimited:
				c.fixed = true
				c.decision = algorithms.Decision{Allowed: true}
			case l.DenyAll:
				c.fixed = true
				c.decision = algorithms.Decision{Allowed: cost <= 0, RetryAfter: algorithms.Never}
			default:
				// NoWait: Envoy cannot hold a request, so a leaky bucket
				// admits only what may start now (the README's "Envoy").
				c.req = store.Request{Key: string(l.AppendKey(kb[:0], entries[i])), Limit: l.Rate, Cost: cost, Mode: algorithms.NoWait}
				if l.ChargeAfter && cost > 0 {
					// charge: after: usage that happened (Envoy's
					// apply_on_stream_done, the actual cost in
					// hits_addend) is owed, never refused.
					c.req.Mode = algorithms.Debt
				}
			}
			checks = append(checks, c)
		}
	}
	return checks
}

// overrideCheck is the check for a descriptor carrying its own limit (set
// in Envoy's route config). It counts in fixed windows, as the reference
// server does, under a key of its own: the domain, the entries and the
// override's rate.
func (e *Envoy) overrideCheck(i int, domain string, entries []rules.Entry, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride, cost int64) envoyCheck {
	period, _ := unitPeriod(rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()))
	l := &rules.Limit{
		Name:   domain + ".override",
		Domain: domain,
		Rate:   algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: int64(o.GetRequestsPerUnit()), Period: period},
	}
	c := envoyCheck{desc: i, limit: l, shadow: e.shadow}
	if o.GetRequestsPerUnit() == 0 {
		c.fixed = true
		c.decision = algorithms.Decision{Allowed: cost <= 0, RetryAfter: algorithms.Never}
		l.DenyAll = true
		c.info = newLimitInfo(l)
		return c
	}
	c.info = newLimitInfo(l) // a request's own limit: nothing to share
	key := keys.AppendOverride(make([]byte, 0, 64), domain, o.GetRequestsPerUnit(), int32(o.GetUnit()))
	for _, en := range entries {
		key = keys.AppendField(key, en.Key)
		key = keys.AppendField(key, en.Value)
	}
	c.req = store.Request{Key: string(key), Limit: l.Rate, Cost: cost}
	return c
}

// decide runs the store calls: the enforced limits together, all or
// nothing, in one call; then the shadow limits, each on its own (a shadow
// deny must not cancel anything), charged only if the request passed.
func (e *Envoy) decide(ctx context.Context, checks []envoyCheck, w *envoyWork) error {
	now := e.clock()
	idx := w.idx[:0]
	reqs := w.reqs[:0]
	for i := range checks {
		if !checks[i].fixed && !checks[i].shadow {
			idx = append(idx, i)
			reqs = append(reqs, checks[i].req)
		}
	}
	allowed := true
	for i := range checks {
		if checks[i].fixed && !checks[i].shadow && !checks[i].decision.Allowed {
			allowed = false
		}
	}
	if len(reqs) > 0 {
		if !allowed { // a deny-all limit already rejects the request: charge nothing
			for i := range reqs {
				reqs[i].DryRun = true
			}
		}
		out := w.out[:]
		if len(reqs) > len(out) {
			out = make([]algorithms.Decision, len(reqs))
		}
		out = out[:len(reqs)]
		if err := e.decideOrFail(ctx, now, reqs, out, checks, idx); err != nil {
			return err
		}
		for _, d := range out {
			allowed = allowed && d.Allowed
		}
	}
	return e.decideShadow(ctx, now, checks, allowed)
}

// decideShadow decides the shadow limits, each on its own, charged only
// when the request passed (allowed). Apart from decide, so that decide's
// stack frame stays small on the way to the store.
func (e *Envoy) decideShadow(ctx context.Context, now time.Time, checks []envoyCheck, allowed bool) error {
	for i := range checks {
		c := &checks[i]
		if !c.shadow || c.fixed {
			continue
		}
		r := c.req
		r.DryRun = !allowed
		var out [1]algorithms.Decision
		if err := e.decideOrFail(ctx, now, []store.Request{r}, out[:], checks, []int{i}); err != nil {
			return err
		}
	}
	return nil
}

// envoyWork is the working memory of a small request, allocated as one
// block: its entries, matches, checks, store requests and decisions.
type envoyWork struct {
	rows    [envoyInline][]rules.Entry
	ents    [2 * envoyInline]rules.Entry
	matches [envoyInline][]*rules.Limit
	checks  [envoyInline]envoyCheck
	reqs    [envoyInline]store.Request
	out     [envoyInline]algorithms.Decision
	idx     [envoyInline]int
}

// decideOrFail asks the store and records the decisions in checks[idx[k]].
// When the store cannot decide, each limit's failure mode answers.
func (e *Envoy) decideOrFail(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision, checks []envoyCheck, idx []int) error {
	sctx, span := e.tracer.start(ctx, spanStore)
	err := e.store.Decide(sctx, now, reqs, out)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, store.ErrInvalid) {
			if span != nil {
				endEnvoyStore(span, checks, idx, reqs[0].DryRun, err, err)
			}
			return err
		}
		e.failures.Failed(ctx, now, err) // logs transitions and summaries, not each decision
	} else {
		e.failures.OK(ctx, now)
	}
	if err == nil {
		for k, i := range idx {
			checks[i].decision = out[k]
		}
	} else {
		modes := make([]rules.FailureMode, len(idx))
		for k, i := range idx {
			c := &checks[i]
			modes[k] = c.limit.FailureMode
			if modes[k] == rules.FailureDefault {
				modes[k] = e.failureMode
			}
			c.degraded = true
			c.local = modes[k] == rules.FailureLocal
		}
		failedDecisions(ctx, e.local, now, reqs, modes, out)
		for k, i := range idx {
			checks[i].decision = out[k]
		}
	}
	if span != nil {
		endEnvoyStore(span, checks, idx, reqs[0].DryRun, err, nil)
	}
	return nil
}

// observe counts the request's decisions. The rule label is the limit's
// name from the config (bounded by the config); with the operator's opt-in
// (DetailedMetricSeries), limits that ask for detailed_metric or
// value_to_metric show the descriptor's values too, bounded per rule.
func (e *Envoy) observe(domain string, entries [][]rules.Entry, checks []envoyCheck) {
	if e.metrics == nil {
		return
	}
	for i := range checks {
		c := &checks[i]
		if c.req.Cost <= 0 && !c.fixed {
			continue
		}
		res := result(c.decision.Allowed, c.shadow, c.degraded, c.local)
		if e.detailSeries > 0 {
			if d := c.limit.MetricName(entries[c.desc]); d != c.limit.Name {
				e.metrics.ObserveDetailedDecision(observability.APIEnvoy, domain, c.limit.Name, d, e.detailSeries, c.limit.Rate.Algorithm, res, observability.NearLimit(c.decision))
				continue
			}
		}
		e.metrics.ObserveRule(&c.info.series, observability.APIEnvoy, domain, c.limit.Name, c.limit.Rate.Algorithm, res, observability.NearLimit(c.decision))
	}
}

// checkRefunds refuses a request that gives hits back (a descriptor with
// is_negative_hits) with codes.PermissionDenied, naming the descriptor,
// when refunds are off (off) or the caller's token may not refund (see
// auth.RefundAllowed). A refund can fill any counter back up, so with tokens
// configured it is a privilege, like Reset.
func checkRefunds(ctx context.Context, req *rlsv3.RateLimitRequest, off bool) error {
	for i, d := range req.GetDescriptors() {
		if !d.GetIsNegativeHits() {
			continue
		}
		field := fmtIndex("descriptors", i) + ".is_negative_hits"
		if off {
			return status.Errorf(codes.PermissionDenied, "%s: refunds are turned off on this server (--envoy-refunds=false)", field)
		}
		if !auth.RefundAllowed(ctx) {
			return status.Errorf(codes.PermissionDenied, "%s: a refund needs a token with the refund or admin role", field)
		}
		return nil
	}
	return nil
}
