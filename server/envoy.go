package server

import (
	"context"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/keys"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store"
)

// Bounds on the counts of an Envoy request, beyond which it is
// InvalidArgument: the descriptors of a request and the entries of each.
// Both counts come from Envoy's own route config, never from a downstream
// client, and are far below these in Envoy configs.
const (
	MaxDescriptors = 64
	MaxEntries     = 32
)

// Envoy serves envoy.service.ratelimit.v3.RateLimitService, so Envoy's
// rate-limit filter can use floodgate in place of envoyproxy/ratelimit.
//
// Unlike the reference server it decides a request all or nothing: when
// one descriptor is over its limit, no other descriptor is charged.
type Envoy struct {
	rlsv3.UnimplementedRateLimitServiceServer
	decider

	opts   EnvoySettings              // its own knobs; the shared ones are the decider's
	limits atomic.Pointer[limitCache] // of the config last served
	panics *observability.LogLimiter  // logs of caught panics
}

var _ rlsv3.RateLimitServiceServer = (*Envoy)(nil)

// NewEnvoy returns the Envoy rate-limit service deciding with st.
func NewEnvoy(st store.Store, s EnvoySettings) *Envoy {
	e := &Envoy{decider: newDecider(st, s.Settings, observability.APIEnvoy), panics: new(observability.LogLimiter)}
	s.Settings, e.opts = Settings{}, s
	return e
}

// envoyCheck is one limit to decide for one descriptor.
type envoyCheck struct {
	desc   int // index of the descriptor
	limit  *rules.Limit
	info   *limitInfo // limit's answer parts and metrics series
	req    store.Request
	shadow bool
	// quota: the limit is in quota mode (its own quota_mode or the
	// server's QuotaMode); see overLimit.
	quota bool
	// peek: a check of 0 hits, decided as a dry run of 1 hit (it denies
	// exactly when the next unit would not fit) and charging nothing.
	peek bool
	// fixed answers without the store: unlimited (allowed) or deny-all.
	fixed    bool
	decision algorithms.Decision
	degraded bool
	local    bool // degraded, and decided by the local share
}

// enforced reports whether c is decided in the request's store call, all
// or nothing with the other enforced limits.
func (c *envoyCheck) enforced() bool { return !c.fixed && !c.shadow }

// envoyInline is how many descriptors, limits and (twice as many)
// entries a request may have before its working memory grows beyond
// envoyWork.
const envoyInline = 4

// ShouldRateLimit implements envoy.service.ratelimit.v3.RateLimitService.
// A panic under it is answered by the request's limits' failure modes
// (recovered), never an error.
func (e *Envoy) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (resp *rlsv3.RateLimitResponse, err error) {
	var planned []envoyCheck
	defer func() {
		if p := recover(); p != nil {
			resp, err = e.recovered(ctx, req, planned, p), nil
		}
	}()
	return e.shouldRateLimit(ctx, req, &planned)
}

// shouldRateLimit answers req, setting *planned to its limits once they
// are known.
func (e *Envoy) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest, planned *[]envoyCheck) (*rlsv3.RateLimitResponse, error) {
	// The request's working memory, one block on the heap: kept on the
	// stack, it would grow the handler goroutine's stack (a copy of the
	// whole stack, each request) deeper in the call.
	w := new(envoyWork)
	req = e.withoutRefusedRefunds(ctx, req)
	entries, err := e.validate(req, w.rows[:], w.ents[:])
	if err != nil {
		return nil, toStatus(ctx, e.log, err)
	}
	checks := e.matchTraced(ctx, req, currentRules(e.cfg), entries, w)
	*planned = checks
	w.descs = len(entries)
	if err := e.decide(ctx, checks, w); err != nil {
		return nil, toStatus(ctx, e.log, err)
	}
	resp := e.answer(checks, len(entries), w)
	if h := e.opts.ReferenceHeaders; h != nil {
		resp.ResponseHeadersToAdd = h.headers(resp.Statuses, quotaMarks(checks, len(entries)), w.batch.now)
	}
	if e.opts.DynamicMetadata {
		resp.DynamicMetadata = dynamicMetadata(req, checks, resp.Statuses)
	}
	e.observe(req.GetDomain(), entries, checks)
	e.track(w.batch.now, entries, checks)
	return resp, nil
}

// validate checks the request's shape and returns its descriptors as
// config entries, in rows and ents when they fit. What it refuses comes
// from Envoy's own config (the domain, the counts, the keys, an override's
// unit); a descriptor value, which a downstream client may choose (a
// header), is never refused, whatever its size: it is matched whole and
// counted under its digest when long (keys.AppendField).
func (e *Envoy) validate(req *rlsv3.RateLimitRequest, rows [][]rules.Entry, ents []rules.Entry) ([][]rules.Entry, error) {
	switch {
	case req.GetDomain() == "":
		return nil, invalidf("domain", "must not be empty")
	case len(req.GetDomain()) > e.maxKey:
		return nil, invalidf("domain", "%d bytes exceed the limit of %d", len(req.GetDomain()), e.maxKey)
	case len(req.GetDescriptors()) == 0:
		return nil, invalidf("descriptors", "must hold at least one descriptor")
	case len(req.GetDescriptors()) > MaxDescriptors:
		return nil, invalidf("descriptors", "%d descriptors exceed the limit of %d", len(req.GetDescriptors()), MaxDescriptors)
	}
	descs := req.GetDescriptors()
	out := fit(rows, len(descs))
	total := 0
	for _, d := range descs {
		total += len(d.GetEntries())
	}
	backing := fit(ents, min(total, MaxDescriptors*MaxEntries))[:0]
	// Field names are built only on the error paths: they allocate.
	for i, d := range descs {
		switch n := len(d.GetEntries()); {
		case n == 0:
			return nil, invalidf(fmtIndex("descriptors", i)+".entries", "must hold at least one entry")
		case n > MaxEntries:
			return nil, invalidf(fmtIndex("descriptors", i)+".entries", "%d entries exceed the limit of %d", n, MaxEntries)
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
			}
			backing = append(backing, rules.Entry{Key: en.GetKey(), Value: en.GetValue()})
		}
		out[i] = backing[start:len(backing):len(backing)]
	}
	return out, nil
}

// fit is buf[:n], or a new slice of n when buf cannot hold n: the
// working memory of a small request comes with it (envoyWork).
func fit[T any](buf []T, n int) []T {
	if n > cap(buf) {
		return make([]T, n)
	}
	return buf[:n]
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

// plan turns the request into the limits to decide, matching into
// w.matches and appending the checks to w.checks when they fit.
func (e *Envoy) plan(req *rlsv3.RateLimitRequest, cfg *rules.Set, entries [][]rules.Entry, w *envoyWork) []envoyCheck {
	matches, checks := fit(w.matches[:], len(entries)), w.checks[:0]
	cfg.MatchRequestInto(matches, req.GetDomain(), entries)
	lc := e.limits.Load()
	if lc == nil || lc.cfg != cfg { // the config changed: a new cache
		lc = &limitCache{cfg: cfg}
		e.limits.Store(lc)
	}
	for i, d := range req.GetDescriptors() {
		dp := descriptorPlan{i: i, domain: req.GetDomain(), entries: entries[i], matched: matches[i]}
		dp.cost = int64(max(req.GetHitsAddend(), 1))
		if h := d.GetHitsAddend(); h != nil {
			dp.cost = int64(min(h.GetValue(), 1<<52))
		}
		if d.GetIsNegativeHits() {
			dp.cost = -dp.cost
		}
		if o := d.GetLimit(); o != nil {
			checks = append(checks, e.overrideCheck(&dp, o))
			continue
		}
		for _, l := range matches[i] {
			checks = append(checks, e.limitCheck(&dp, l, lc.info(l)))
		}
	}
	return checks
}

// descriptorPlan is what planning one descriptor's checks needs.
type descriptorPlan struct {
	i       int // the descriptor's index
	domain  string
	entries []rules.Entry
	matched []*rules.Limit // the config's limits for it
	cost    int64          // hits: > 0 charges, 0 looks, < 0 refunds
}

// request is the store request charging dp's cost under key with rate;
// a cost of 0 is a dry run of 1 (peek).
func (dp *descriptorPlan) request(key string, rate algorithms.Limit) (r store.Request, peek bool) {
	r = store.Request{Key: key, Limit: rate, Cost: dp.cost}
	if dp.cost == 0 {
		r.Cost, r.DryRun = 1, true
	}
	return r, dp.cost == 0
}

// limitCheck is the check of the configured limit l for dp.
func (e *Envoy) limitCheck(dp *descriptorPlan, l *rules.Limit, info *limitInfo) envoyCheck {
	c := envoyCheck{desc: dp.i, limit: l, info: info, shadow: e.opts.ShadowMode || l.ShadowMode, quota: e.opts.QuotaMode || l.QuotaMode}
	switch {
	case l.Unlimited:
		c.fixed = true
		c.decision = algorithms.Decision{Allowed: true}
	case l.DenyAll:
		c.fixed = true
		c.decision = algorithms.Decision{Allowed: dp.cost < 0, RetryAfter: algorithms.Never}
	default:
		var kb [128]byte // a key is built here, then copied into its string
		c.req, c.peek = dp.request(string(l.AppendKey(kb[:0], dp.entries)), l.Rate)
		// NoWait: Envoy cannot hold a request, so an algorithm that waits
		// (algorithms.Facts.Waits) admits only what may start now (the
		// README's "Envoy").
		c.req.Mode = algorithms.NoWait
		if l.ChargeAfter && c.req.Cost > 0 {
			// charge: after: usage that happened (Envoy's
			// apply_on_stream_done, the actual cost in hits_addend) is
			// owed, never refused.
			c.req.Mode |= algorithms.Debt
		}
	}
	return c
}

// overrideCheck is the check for a descriptor carrying its own limit (set
// in Envoy's route config). It counts as the reference server does
// (algorithms.Compatible). With ShareOverrideCounters it counts where the
// reference does: under the key of the descriptor's rule when that rule
// counts so, in windows of the override's unit (so both see one count), else
// under a key of the domain, the entries and the unit; without, under a
// key of its own that names the override's rate too. It is never in
// quota or shadow mode beyond the server's, has no name and no metadata,
// as in the reference.
func (e *Envoy) overrideCheck(dp *descriptorPlan, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) envoyCheck {
	period, _ := unitPeriod(rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()))
	l := &rules.Limit{
		Name:    dp.domain + ".override",
		Domain:  dp.domain,
		Rate:    algorithms.Limit{Algorithm: algorithms.Compatible, Requests: int64(o.GetRequestsPerUnit()), Period: period},
		DenyAll: o.GetRequestsPerUnit() == 0,
	}
	// A request's own limit: its limitInfo is its own, shared with none.
	c := envoyCheck{desc: dp.i, limit: l, info: newLimitInfo(l), shadow: e.opts.ShadowMode, quota: e.opts.QuotaMode}
	if l.DenyAll {
		c.fixed = true
		c.decision = algorithms.Decision{Allowed: dp.cost < 0, RetryAfter: algorithms.Never}
		return c
	}
	var key []byte
	if rule := sharedRule(dp.matched, period); e.opts.ShareOverrideCounters && rule != nil {
		key = rule.AppendKey(make([]byte, 0, 64), dp.entries)
	} else {
		if e.opts.ShareOverrideCounters {
			key = keys.AppendOverrideUnit(make([]byte, 0, 64), dp.domain, int32(o.GetUnit()))
		} else {
			key = keys.AppendOverride(make([]byte, 0, 64), dp.domain, o.GetRequestsPerUnit(), int32(o.GetUnit()))
		}
		for _, en := range dp.entries {
			key = keys.AppendField(key, en.Key)
			key = keys.AppendField(key, en.Value)
		}
	}
	c.req, c.peek = dp.request(string(key), l.Rate)
	return c
}

// sharedRule is the first of a descriptor's limits whose counter an
// override of period shares: one that counts as the override does
// (algorithms.Compatible) in windows of that period (another algorithm's
// state, or a calendar period's, means something else), or nil.
func sharedRule(matched []*rules.Limit, period time.Duration) *rules.Limit {
	for _, l := range matched {
		if !l.Unlimited && !l.DenyAll && !l.ChargeAfter && l.Rate.Algorithm == algorithms.Compatible &&
			l.Rate.Calendar == algorithms.NoCalendar && l.Rate.Period == period {
			return l
		}
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
		l := observability.Labels{
			API: observability.APIEnvoy, Domain: domain, Rule: c.limit.Name, Algorithm: c.limit.Rate.Algorithm,
			Result: result(c.decision.Allowed, c.shadow, c.degraded, c.local),
		}
		if e.opts.DetailedMetricSeries > 0 {
			if d := c.limit.MetricName(entries[c.desc]); d != c.limit.Name {
				e.metrics.ObserveDetailedDecision(l, d, e.opts.DetailedMetricSeries, observability.NearLimit(c.decision, c.info.warnAt))
				continue
			}
		}
		e.metrics.ObserveRule(&c.info.series, l, observability.NearLimit(c.decision, c.info.warnAt))
	}
}

// track hands an Envoy request's decisions at now to the heavy-hitter
// tracker, each under its rule with its descriptor's entries. Limits the
// store did not decide (unlimited, deny-all, a request's own override),
// degraded decisions and looks are not counted.
func (e *Envoy) track(now time.Time, entries [][]rules.Entry, checks []envoyCheck) {
	if e.limited == nil {
		return
	}
	for i := range checks {
		c := &checks[i]
		if c.fixed || c.degraded || c.peek || c.limit.ID == "" {
			continue
		}
		e.limited.ObserveEnvoy(now, c.limit, entries[c.desc], c.req.Cost, c.decision.Allowed)
	}
}
