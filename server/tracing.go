package server

import (
	"context"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/rules"
)

// Span names and attributes of floodgate's own spans, children of the gRPC
// server span. Keys and descriptor values go into spans only with
// spanTracer.values (--trace-values): they can be personal data.
const (
	spanMatch = "floodgate.match" // finding the limits of a request
	spanStore = "floodgate.store" // the store call that decides them

	attrDomain      = attribute.Key("floodgate.domain")
	attrDescriptors = attribute.Key("floodgate.descriptors") // how many the request has
	attrRules       = attribute.Key("floodgate.rules")       // one per limit, in order
	attrAlgorithms  = attribute.Key("floodgate.algorithms")  // one per limit, in order
	attrBatchSize   = attribute.Key("floodgate.batch_size")  // limits in the store call
	attrDecision    = attribute.Key("floodgate.decision")    // allowed or denied (all or nothing)
	attrDegraded    = attribute.Key("floodgate.degraded")    // the store failed: failure modes answered
	attrShadow      = attribute.Key("floodgate.shadow")      // a shadow-mode limit's store call
	attrDryRun      = attribute.Key("floodgate.dry_run")     // charges nothing (Peek, or the request was denied already)
	attrValues      = attribute.Key("floodgate.values")      // opt-in: descriptors as k=v,k=v, one per descriptor
	attrKeys        = attribute.Key("floodgate.keys")        // opt-in: the Check API's keys
)

// spanTracer starts the child spans of a traced call: rule matching and
// the store call. Its zero value traces nothing.
type spanTracer struct {
	tracer trace.Tracer // nil: tracing is off
	values bool         // keys and descriptor values go into spans
}

// start starts a span named name, a child of ctx's span, when that one is
// recording (a sampled call); else it returns ctx and nil, having
// allocated nothing.
func (t spanTracer) start(ctx context.Context, name string) (context.Context, trace.Span) {
	if t.tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return t.tracer.Start(ctx, name)
}

// The traced forms of the request's steps: each runs its step untraced
// when the call is not traced, else inside its span, which it ends with
// what the step found. The steps themselves know nothing of tracing.

// resolveTraced is resolve in a match span.
func (r *RateLimiter) resolveTraced(ctx context.Context, req checkFields) (check, error) {
	_, span := r.tracer.start(ctx, spanMatch)
	if span == nil {
		return r.resolve(req)
	}
	c, err := r.resolve(req)
	var checks []check
	if err == nil {
		checks = []check{c}
	}
	r.tracer.endCheckMatch(span, checks, []string{req.GetKey()}, err)
	return c, err
}

// resolveAllTraced is resolveAll in a match span.
func (r *RateLimiter) resolveAllTraced(ctx context.Context, req *floodgatev1.CheckBatchRequest) ([]check, error) {
	_, span := r.tracer.start(ctx, spanMatch)
	if span == nil {
		return r.resolveAll(req)
	}
	checks, err := r.resolveAll(req)
	r.tracer.endCheckMatch(span, checks, requestKeys(req), err)
	return checks, err
}

// requestKeys are the keys of a batch's checks.
func requestKeys(req *floodgatev1.CheckBatchRequest) []string {
	ks := make([]string, len(req.GetChecks()))
	for i, c := range req.GetChecks() {
		ks[i] = c.GetKey()
	}
	return ks
}

// storeTraced is storeDecide of the Check API's checks in a store span.
func (r *RateLimiter) storeTraced(ctx context.Context, checks []check, b failedBatch) (storeAnswer, error) {
	mode := func(k int) rules.FailureMode { return checks[k].failureMode }
	sctx, span := r.tracer.start(ctx, spanStore)
	if span == nil {
		return r.storeDecide(ctx, b, mode)
	}
	a, err := r.storeDecide(sctx, b, mode)
	if err != nil {
		endCheckStore(span, checks, nil, storeOutcome{err: err})
	} else {
		endCheckStore(span, checks, b.out, storeOutcome{err: a.err, answered: true})
	}
	return a, err
}

// matchTraced is plan in a match span: the request's checks, and whether
// its domain is known (false: no checks, cfg nil or without the domain).
func (e *Envoy) matchTraced(ctx context.Context, req *rlsv3.RateLimitRequest, cfg *rules.Set, entries [][]rules.Entry, w *envoyWork) ([]envoyCheck, bool) {
	_, span := e.tracer.start(ctx, spanMatch)
	var checks []envoyCheck
	known := cfg != nil && cfg.HasDomain(req.GetDomain())
	if known {
		checks = e.plan(req, cfg, entries, w)
	}
	if span != nil {
		e.tracer.endEnvoyMatch(span, req.GetDomain(), entries, checks)
	}
	return checks, known
}

// runTraced is runStore in a store span.
func (e *Envoy) runTraced(ctx context.Context, checks []envoyCheck, b *envoyBatch, record bool) (storeAnswer, error) {
	sctx, span := e.tracer.start(ctx, spanStore)
	if span == nil {
		return e.runStore(ctx, checks, b, record)
	}
	a, err := e.runStore(sctx, checks, b, record)
	if err != nil {
		endEnvoyStore(span, checks, b, storeOutcome{err: err})
	} else {
		endEnvoyStore(span, checks, b, storeOutcome{err: a.err, answered: true})
	}
	return a, err
}

// end ends span, with err (if not nil) as its status.
func end(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// decisionName is the decision attribute of allowed.
func decisionName(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

// endCheckMatch ends the match span of the Check API: the limits that the
// checks resolved to, and their keys with values.
func (t spanTracer) endCheckMatch(span trace.Span, checks []check, keys []string, err error) {
	rs, algs := make([]string, len(checks)), make([]string, len(checks))
	for i, c := range checks {
		rs[i], algs[i] = c.rule, c.req.Limit.Algorithm.String()
	}
	span.SetAttributes(attrBatchSize.Int(len(checks)), attrRules.StringSlice(rs), attrAlgorithms.StringSlice(algs))
	if t.values {
		span.SetAttributes(attrKeys.StringSlice(keys))
	}
	end(span, err)
}

// storeOutcome is how a store call ended, for its span: err is the
// store's error (nil when it decided); answered says the failure modes
// answered all the same (degraded), so the call does not fail with err.
type storeOutcome struct {
	err      error
	answered bool
}

// failed reports whether the call fails with the store's error.
func (o storeOutcome) failed() bool { return o.err != nil && !o.answered }

// endCheckStore ends the store span of the Check API: out holds the
// decisions, unless the call failed (o.failed, out nil).
func endCheckStore(span trace.Span, checks []check, out []algorithms.Decision, o storeOutcome) {
	degraded, storeErr := o.err != nil && o.answered, o.err
	rs, algs := make([]string, len(checks)), make([]string, len(checks))
	allowed, dry := true, false
	for i, c := range checks {
		rs[i], algs[i] = c.rule, c.req.Limit.Algorithm.String()
		dry = dry || c.req.DryRun
		if out != nil {
			allowed = allowed && (out[i].Allowed || c.shadow)
		}
	}
	span.SetAttributes(attrBatchSize.Int(len(checks)), attrRules.StringSlice(rs), attrAlgorithms.StringSlice(algs),
		attrDegraded.Bool(degraded), attrDryRun.Bool(dry))
	if out != nil {
		span.SetAttributes(attrDecision.String(decisionName(allowed)))
	}
	if degraded {
		span.RecordError(storeErr)
		storeErr = nil // answered all the same
	}
	end(span, storeErr)
}

// endEnvoyMatch ends the match span of ShouldRateLimit: the domain, the
// limits found (none for an unknown domain), and the descriptors' values
// with values.
func (t spanTracer) endEnvoyMatch(span trace.Span, domain string, entries [][]rules.Entry, checks []envoyCheck) {
	rs, algs := make([]string, len(checks)), make([]string, len(checks))
	for i := range checks {
		rs[i], algs[i] = checks[i].limit.Name, checks[i].limit.Rate.Algorithm.String()
	}
	span.SetAttributes(attrDomain.String(domain), attrDescriptors.Int(len(entries)),
		attrRules.StringSlice(rs), attrAlgorithms.StringSlice(algs))
	if t.values {
		vals := make([]string, len(entries))
		for i, d := range entries {
			var b strings.Builder
			for j, en := range d {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(en.Key)
				b.WriteByte('=')
				b.WriteString(en.Value)
			}
			vals[i] = b.String()
		}
		span.SetAttributes(attrValues.StringSlice(vals))
	}
	span.End()
}

// endEnvoyStore ends the store span of batch b of ShouldRateLimit; the
// decisions of its checks are set unless the call failed (o.failed).
func endEnvoyStore(span trace.Span, checks []envoyCheck, b *envoyBatch, o storeOutcome) {
	idx, dryRun, storeErr := b.Idx, b.Reqs[0].DryRun, o.err
	var err error
	if o.failed() {
		err = o.err
	}
	rs, algs := make([]string, len(idx)), make([]string, len(idx))
	allowed, degraded, shadow := true, false, false
	for k, i := range idx {
		c := &checks[i]
		rs[k], algs[k] = c.limit.Name, c.limit.Rate.Algorithm.String()
		allowed = allowed && c.decision.Allowed
		degraded = degraded || c.degraded
		shadow = shadow || c.shadow
	}
	span.SetAttributes(attrBatchSize.Int(len(idx)), attrRules.StringSlice(rs), attrAlgorithms.StringSlice(algs),
		attrDegraded.Bool(degraded), attrShadow.Bool(shadow), attrDryRun.Bool(dryRun))
	if err == nil {
		span.SetAttributes(attrDecision.String(decisionName(allowed)))
	}
	if storeErr != nil && err == nil { // decided by the failure modes
		span.RecordError(storeErr)
	}
	end(span, err)
}
