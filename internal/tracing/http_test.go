package tracing

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/httpapi"
	"github.com/floodgate/floodgate/store/memstore"
)

// serveHTTPAPI serves the HTTP/JSON API behind tr.HTTPHandler.
func serveHTTPAPI(t *testing.T, tr *Tracing, next func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	var h http.Handler = httpapi.New(server.NewRateLimiter(st, server.CheckSettings{Settings: server.Settings{Tracer: tr.Tracer()}}), httpapi.Settings{})
	if next != nil {
		h = next(h)
	}
	srv := httptest.NewServer(tr.HTTPHandler(h))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url string, hdr ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":5,"period":"1s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestHTTPServerSpan(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	exp := tracetest.NewInMemoryExporter()
	tr := New(exp, Config{}, slog.New(slog.DiscardHandler))
	srv := serveHTTPAPI(t, tr, nil)
	if code := post(t, srv.URL+httpapi.PathCheck, "traceparent", "00-"+traceID+"-"+spanID+"-01"); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if code := post(t, srv.URL+"/v1/nope"); code != http.StatusNotFound {
		t.Fatalf("status %d for a path that is no route", code)
	}
	// A caller that did not sample: no span at all.
	if code := post(t, srv.URL+httpapi.PathCheck, "x-b3-traceid", traceID, "x-b3-spanid", spanID, "x-b3-sampled", "0"); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if err := tr.provider.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	check, ok := byName["POST /v1/check"]
	if !ok || len(byName) != 4 {
		t.Fatalf("spans %v: want POST /v1/check with its match and store spans, and POST for the 404", byName)
	}
	if check.SpanKind != trace.SpanKindServer || check.Parent.TraceID().String() != traceID || check.Parent.SpanID().String() != spanID {
		t.Errorf("server span kind %v, parent %v: want a server span under the caller's traceparent", check.SpanKind, check.Parent)
	}
	attrs := attribute.NewSet(check.Attributes...)
	if v, _ := attrs.Value("http.route"); v.AsString() != "/v1/check" {
		t.Errorf("http.route %q", v.AsString())
	}
	if v, _ := attrs.Value("http.response.status_code"); v.AsInt64() != http.StatusOK {
		t.Errorf("http.response.status_code %d", v.AsInt64())
	}
	for _, n := range []string{"floodgate.match", "floodgate.store"} {
		if byName[n].Parent.SpanID() != check.SpanContext.SpanID() {
			t.Errorf("%s: parent %v, want the HTTP server span", n, byName[n].Parent.SpanID())
		}
	}
	nf := byName["POST"]
	nfAttrs := attribute.NewSet(nf.Attributes...)
	if v, _ := nfAttrs.Value("http.response.status_code"); v.AsInt64() != http.StatusNotFound || nf.Status.Code == otelcodes.Error {
		t.Errorf("404 span: status code %d, span status %v; want 404, not an error", v.AsInt64(), nf.Status.Code)
	}
}

// TestHTTPServerSpanError: an answer of 5xx marks the span an error.
func TestHTTPServerSpanError(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := New(exp, Config{}, slog.New(slog.DiscardHandler))
	srv := serveHTTPAPI(t, tr, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	})
	if code := post(t, srv.URL+httpapi.PathCheck); code != http.StatusServiceUnavailable {
		t.Fatalf("status %d", code)
	}
	if err := tr.provider.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Code != otelcodes.Error {
		t.Fatalf("spans %v, want one marked an error", spans)
	}
}

// TestHTTPHandlerOff: with tracing off the handler is the API itself.
func TestHTTPHandlerOff(t *testing.T) {
	h := http.NewServeMux()
	for _, tr := range []*Tracing{nil, {}} {
		if got := tr.HTTPHandler(h); got != http.Handler(h) {
			t.Errorf("tracing off: handler %T, want the API itself", got)
		}
	}
}
