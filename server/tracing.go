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
	attrBatchSize   = attribute.Key("floodgate.batch_size")  // limits found, or in the store call
	attrDecision    = attribute.Key("floodgate.decision")    // the store's: allowed or denied (all or nothing)
	attrDegraded    = attribute.Key("floodgate.degraded")    // the store failed: failure modes answered
	attrShadow      = attribute.Key("floodgate.shadow")      // the store call holds a shadow-mode limit
	attrDryRun      = attribute.Key("floodgate.dry_run")     // charges nothing (Peek, or the request was denied already)
	attrValues      = attribute.Key("floodgate.values")      // opt-in: descriptors as k=v,k=v, one per descriptor
	attrKeys        = attribute.Key("floodgate.keys")        // opt-in: the Check API's keys
)

// spanTracer starts the child spans of a traced call: rule matching and
// the store call. Its zero value traces nothing. The steps themselves
// know nothing of tracing: the functions below wrap them.
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

// spanLimit is what a span says of one limit.
type spanLimit struct {
	rule   string
	alg    algorithms.Algorithm
	shadow bool
}

// spanLimit is what a span says of c's limit.
func (c *check) spanLimit() spanLimit {
	return spanLimit{c.rule, c.req.Limit.Algorithm, c.shadow}
}

// spanLimit is what a span says of c's limit.
func (c *envoyCheck) spanLimit() spanLimit {
	return spanLimit{c.limit.Name, c.limit.Rate.Algorithm, c.shadow}
}

// limitAttrs are the attributes of n limits, limit(i) the i-th.
func limitAttrs(n int, limit func(i int) spanLimit) []attribute.KeyValue {
	rs, algs := make([]string, n), make([]string, n)
	for i := range n {
		l := limit(i)
		rs[i], algs[i] = l.rule, l.alg.String()
	}
	return []attribute.KeyValue{attrBatchSize.Int(n), attrRules.StringSlice(rs), attrAlgorithms.StringSlice(algs)}
}

// end ends span, with err (if not nil) as its status.
func end(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// resolveTraced is resolve in a match span.
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

// resolveAllTraced is resolveAll in a match span.
func (r *RateLimiter) resolveAllTraced(ctx context.Context, req *floodgatev1.CheckBatchRequest) ([]check, error) {
	_, span := r.tracer.start(ctx, spanMatch)
	checks, err := r.resolveAll(req)
	if span != nil {
		ks := make([]string, len(req.GetChecks()))
		for i, c := range req.GetChecks() {
			ks[i] = c.GetKey()
		}
		r.tracer.endCheckMatch(span, checks, ks, err)
	}
	return checks, err
}

// endCheckMatch ends the match span of the Check API: the limits that the
// checks resolved to, and their keys with values.
func (t spanTracer) endCheckMatch(span trace.Span, checks []check, keys []string, err error) {
	span.SetAttributes(limitAttrs(len(checks), func(i int) spanLimit { return checks[i].spanLimit() })...)
	if t.values {
		span.SetAttributes(attrKeys.StringSlice(keys))
	}
	end(span, err)
}

// matchTraced is plan in a match span: the request's checks, none when
// cfg is nil or does not know its domain (every descriptor is then OK, as
// envoyproxy/ratelimit answers an unknown domain). The span says the
// domain, the limits found and, with values, the descriptors' values.
func (e *Envoy) matchTraced(ctx context.Context, req *rlsv3.RateLimitRequest, cfg *rules.Set, entries [][]rules.Entry, w *envoyWork) []envoyCheck {
	_, span := e.tracer.start(ctx, spanMatch)
	checks := w.checks[:0] // not nil: a later panic answers by these limits (recovered)
	if cfg != nil && cfg.HasDomain(req.GetDomain()) {
		checks = e.plan(req, cfg, entries, w)
	}
	if span == nil {
		return checks
	}
	span.SetAttributes(limitAttrs(len(checks), func(i int) spanLimit { return checks[i].spanLimit() })...)
	span.SetAttributes(attrDomain.String(req.GetDomain()), attrDescriptors.Int(len(entries)))
	if e.tracer.values {
		vals := make([]string, len(entries))
		for i, d := range entries {
			kvs := make([]string, len(d))
			for j, en := range d {
				kvs[j] = en.Key + "=" + en.Value
			}
			vals[i] = strings.Join(kvs, ",")
		}
		span.SetAttributes(attrValues.StringSlice(vals))
	}
	span.End()
	return checks
}

// storeTraced is storeDecide in a store span; limit(k) is request k's
// limit. The span says the limits, the store's decision, whether the
// failure modes answered (the store's error recorded, the span no error)
// and whether the call holds a shadow limit or a look.
func (d *decider) storeTraced(ctx context.Context, b failedBatch, mode func(k int) rules.FailureMode, limit func(k int) spanLimit) (storeAnswer, error) {
	sctx, span := d.tracer.start(ctx, spanStore)
	a, err := d.storeDecide(sctx, b, mode)
	if span == nil {
		return a, err
	}
	allowed, shadow, dry := true, false, false
	for k, r := range b.reqs {
		allowed = allowed && b.out[k].Allowed
		shadow = shadow || limit(k).shadow
		dry = dry || r.DryRun
	}
	span.SetAttributes(limitAttrs(len(b.reqs), limit)...)
	span.SetAttributes(attrDegraded.Bool(a.any()), attrShadow.Bool(shadow), attrDryRun.Bool(dry))
	if err == nil {
		decision := "denied"
		if allowed {
			decision = "allowed"
		}
		span.SetAttributes(attrDecision.String(decision))
		if a.err != nil {
			span.RecordError(a.err) // answered by the failure modes
		}
	}
	end(span, err)
	return a, err
}
