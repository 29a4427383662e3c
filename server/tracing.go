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

// endCheckStore ends the store span of the Check API. The store failed
// with storeErr, if not nil: then, when degraded, the failure modes
// answered out, else the call fails (out is nil).
func endCheckStore(span trace.Span, checks []check, out []algorithms.Decision, degraded bool, storeErr error) {
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

// endEnvoyStore ends the store span of the checks idx of ShouldRateLimit;
// their decisions are set unless err.
func endEnvoyStore(span trace.Span, checks []envoyCheck, idx []int, dryRun bool, storeErr, err error) {
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
