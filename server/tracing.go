package server

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/floodgate/floodgate/algorithms"
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
