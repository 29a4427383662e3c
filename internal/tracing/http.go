package tracing

import (
	"net/http"
	"net/textproto"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"

	"github.com/floodgate/floodgate/internal/observability"
)

// HTTPHandler wraps next, the HTTP/JSON API, so that each sampled request
// gets a server span as ServerInterceptors give gRPC calls, named after
// the route ("POST /v1/check"); a 5xx marks it an error. It returns next
// itself when tracing is off.
func (t *Tracing) HTTPHandler(next http.Handler) http.Handler {
	if !t.On() {
		return next
	}
	s := t.spans
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := startSpan(s, r.Context(), httpHeaders(r.Header), r.Method,
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
		)
		if span == nil {
			next.ServeHTTP(w, r)
			return
		}
		rec := &observability.StatusRecorder{ResponseWriter: w}
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r)
		// A ServeMux records the pattern that matched on the request
		// it was given, "POST /v1/check".
		if _, route, ok := strings.Cut(r.Pattern, " "); ok && strings.HasPrefix(route, "/") {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
		code := rec.Code()
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		if code >= 500 {
			span.SetStatus(otelcodes.Error, http.StatusText(code))
		}
		span.End()
	})
}

// httpHeaders are an HTTP request's trace headers.
type httpHeaders http.Header

func (h httpHeaders) values(key string) []string {
	switch key { // the canonical forms of the keys presample reads, without allocating
	case "traceparent":
		return h["Traceparent"]
	case "b3":
		return h["B3"]
	case "x-b3-traceid":
		return h["X-B3-Traceid"]
	case "x-b3-sampled":
		return h["X-B3-Sampled"]
	case "x-b3-flags":
		return h["X-B3-Flags"]
	}
	return h[textproto.CanonicalMIMEHeaderKey(key)]
}

func (h httpHeaders) carrier() propagation.TextMapCarrier { return propagation.HeaderCarrier(h) }
