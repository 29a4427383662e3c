package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/httpapi"
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/redisstore"
)

// serve starts the API over rl's store on a test HTTP server.
func serve(t testing.TB, rl *server.RateLimiter, s httpapi.Settings) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(httpapi.New(rl, s))
	t.Cleanup(srv.Close)
	return srv
}

func postJSON(t testing.TB, srv *httptest.Server, path, auth, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// deadRedis is a Redis store on a loopback port nobody listens on.
func deadRedis(t *testing.T) *redisstore.Store {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	client, err := redisstore.NewClient(redisstore.ClientConfig{URL: "redis://" + addr, DialTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st, err := redisstore.New(client, redisstore.Config{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); client.Close() })
	return st
}

// TestDegradedHeaders: when the store cannot decide, the answer is the
// failure mode's (200; allowed when open, denied when closed) with
// X-RateLimit-Degraded and, on a denial, Retry-After; nothing about the
// quota, which nobody knows.
func TestDegradedHeaders(t *testing.T) {
	st := deadRedis(t)
	body := `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":5,"period":"60s"}}`
	for _, tc := range []struct {
		mode        rules.FailureMode
		allowed     bool
		retryAfter  string
		wantInReply string
	}{
		{rules.FailureOpen, true, "", `"allowed":true`},
		{rules.FailureClosed, false, "1", `"allowed":false`},
	} {
		rl := server.NewRateLimiter(st, server.CheckSettings{Settings: server.Settings{FailureMode: tc.mode}, API: observability.APIHTTP})
		srv := serve(t, rl, httpapi.Settings{})
		resp, got := postJSON(t, srv, httpapi.PathCheck, "", body)
		if resp.StatusCode != 200 || !strings.Contains(got, tc.wantInReply) || !strings.Contains(got, `"degraded":true`) {
			t.Errorf("%v: %d %s, want 200 with %s, degraded", tc.mode, resp.StatusCode, got, tc.wantInReply)
		}
		h := resp.Header
		if h.Get("X-RateLimit-Degraded") != "true" || h.Get("Retry-After") != tc.retryAfter {
			t.Errorf("%v: X-RateLimit-Degraded %q, Retry-After %q; want true, %q", tc.mode, h.Get("X-RateLimit-Degraded"), h.Get("Retry-After"), tc.retryAfter)
		}
		for _, k := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Remaining", "X-RateLimit-Limit"} {
			if v := h.Get(k); v != "" {
				t.Errorf("%v: %s %q on a degraded answer", tc.mode, k, v)
			}
		}
	}
	// A reset cannot be answered by a failure mode: 503.
	rl := server.NewRateLimiter(st, server.CheckSettings{})
	resp, got := postJSON(t, serve(t, rl, httpapi.Settings{}), httpapi.PathReset, "", `{"key":"k"}`)
	if resp.StatusCode != 503 || !strings.Contains(got, `"code":"UNAVAILABLE"`) {
		t.Errorf("reset on a dead store: %d %s, want 503 UNAVAILABLE", resp.StatusCode, got)
	}
}

// TestAuthorize: TokenAuth.Authorize applies the gRPC rules to an HTTP
// Authorization header.
func TestAuthorize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("admintok admin\nusertok\nrefundtok refund\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokenAuth(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tokens.Close()
	check, reset := floodgatev1.RateLimiter_Check_FullMethodName, floodgatev1.RateLimiter_Reset_FullMethodName
	for _, tc := range []struct {
		method, header string
		want           codes.Code
		refund         bool
	}{
		{check, "", codes.Unauthenticated, false},
		{check, "Bearer", codes.Unauthenticated, false},
		{check, "Bearer nope", codes.Unauthenticated, false},
		{check, "Basic usertok", codes.Unauthenticated, false},
		{check, "Bearer usertok", codes.OK, false},
		{check, "Bearer refundtok", codes.OK, true},
		{reset, "Bearer usertok", codes.PermissionDenied, false},
		{reset, "Bearer admintok", codes.OK, true},
	} {
		ctx, err := tokens.Authorize(context.Background(), tc.method, tc.header)
		if got := status.Code(err); got != tc.want {
			t.Errorf("%s with %q: %v, want %v", tc.method, tc.header, got, tc.want)
			continue
		}
		if err == nil && auth.RefundAllowed(ctx) != tc.refund {
			t.Errorf("%s with %q: RefundAllowed %v, want %v", tc.method, tc.header, !tc.refund, tc.refund)
		}
	}
}

// TestErrorBody: errors are {"code","message"} with google.rpc.Code names.
func TestErrorBody(t *testing.T) {
	rl := server.NewRateLimiter(memstore.New(memstore.Config{}), server.CheckSettings{})
	srv := serve(t, rl, httpapi.Settings{})
	resp, got := postJSON(t, srv, httpapi.PathCheck, "", `{"key":"","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":5,"period":"60s"}}`)
	var e struct{ Code, Message string }
	if err := json.Unmarshal([]byte(got), &e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || e.Code != "INVALID_ARGUMENT" || e.Message != "key: must not be empty" {
		t.Errorf("%d %+v, want 400 INVALID_ARGUMENT key: must not be empty", resp.StatusCode, e)
	}
}

// TestSettle: POST /v1/settle is RateLimiter/Settle in JSON: a debt, then
// the retry answers duplicate; a bad field is a 400 naming it.
func TestSettle(t *testing.T) {
	st := memstore.New(memstore.Config{})
	defer st.Close()
	h := serve(t, server.NewRateLimiter(st, server.CheckSettings{}), httpapi.Settings{})
	body := `{"key":"tenant:a","algorithm":"ALGORITHM_FIXED_WINDOW","limit":{"requests":100,"period":"60s"},"reserved":10,"actual":150,"idempotency_key":"req-1"}`
	resp, got := postJSON(t, h, httpapi.PathSettle, "", body)
	if resp.StatusCode != 200 || !strings.Contains(got, `"debt":"40"`) || !strings.Contains(got, `"duplicate":false`) {
		t.Fatalf("settle: %d %s, want 200 with debt 40", resp.StatusCode, got)
	}
	resp, got = postJSON(t, h, httpapi.PathSettle, "", body)
	if resp.StatusCode != 200 || !strings.Contains(got, `"duplicate":true`) || !strings.Contains(got, `"debt":"40"`) {
		t.Fatalf("retry: %d %s, want 200, a duplicate owing 40", resp.StatusCode, got)
	}
	resp, got = postJSON(t, h, httpapi.PathSettle, "", `{"key":"k","algorithm":"ALGORITHM_FIXED_WINDOW","limit":{"requests":100,"period":"60s"},"actual":1}`)
	if resp.StatusCode != 400 || !strings.Contains(got, "idempotency_key") {
		t.Fatalf("no idempotency key: %d %s, want 400 naming idempotency_key", resp.StatusCode, got)
	}
}

// TestSettleRefundNeedsRole: with tokens configured, a settle that gives
// units back (actual below reserved) needs the refund or admin role, like
// an Envoy refund: otherwise a caller could refill its counter at will,
// with a fresh idempotency key each time. A settle that charges needs none.
func TestSettleRefundNeedsRole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("usertok\nrefundtok refund\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokenAuth(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tokens.Close()
	st := memstore.New(memstore.Config{})
	defer st.Close()
	h := serve(t, server.NewRateLimiter(st, server.CheckSettings{}), httpapi.Settings{Auth: tokens})
	settle := func(token string, reserved, actual int, ik string) (int, string) {
		resp, got := postJSON(t, h, httpapi.PathSettle, "Bearer "+token, fmt.Sprintf(`{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":10,"period":"60s"},"reserved":%d,"actual":%d,"idempotency_key":%q}`, reserved, actual, ik))
		return resp.StatusCode, got
	}
	if code, got := settle("usertok", 0, 8, "a"); code != 200 {
		t.Fatalf("a charge with a plain token: %d %s", code, got)
	}
	if code, got := settle("usertok", 8, 0, "b"); code != 403 || !strings.Contains(got, "actual:") {
		t.Fatalf("a refund with a plain token: %d %s, want 403 naming actual", code, got)
	}
	if code, got := settle("refundtok", 8, 0, "c"); code != 200 || !strings.Contains(got, `"remaining":"10"`) {
		t.Fatalf("a refund with the refund role: %d %s, want 200, remaining 10", code, got)
	}
}

// TestRequestMetrics: each answer is counted under its route and HTTP
// status, a path that is no route under "other".
func TestRequestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	rl := server.NewRateLimiter(memstore.New(memstore.Config{}), server.CheckSettings{})
	srv := serve(t, rl, httpapi.Settings{Metrics: reg})
	postJSON(t, srv, httpapi.PathCheck, "", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":5,"period":"60s"}}`)
	postJSON(t, srv, httpapi.PathCheck, "", `{"key":""}`)
	postJSON(t, srv, "/v1/nope", "", `{}`)
	for _, path := range []string{httpapi.PathCheckBatch, httpapi.PathPeek, httpapi.PathReset, httpapi.PathSettle} {
		postJSON(t, srv, path, "", `{"key":""}`)
	}
	got := map[string]float64{}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "floodgate_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var route, code string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					route = l.GetValue()
				case "code":
					code = l.GetValue()
				}
			}
			if v := m.GetCounter().GetValue(); v > 0 {
				got[route+" "+code] = v
			}
		}
	}
	want := map[string]float64{"check 200": 1, "check 400": 1, "other 404": 1,
		"check_batch 400": 1, "peek 400": 1, "reset 400": 1, "settle 400": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests by route and code %v, want %v", got, want)
	}
}

// TestResetRefused: with ResetRefused set, a reset is turned away (403,
// the reason in the message), and only a reset: a check and a peek of the
// same key are answered.
func TestResetRefused(t *testing.T) {
	rl := server.NewRateLimiter(memstore.New(memstore.Config{}), server.CheckSettings{})
	srv := serve(t, rl, httpapi.Settings{ResetRefused: "reset is refused on this port"})
	body := `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":5,"period":"60s"}}`
	if resp, got := postJSON(t, srv, httpapi.PathReset, "", body); resp.StatusCode != http.StatusForbidden || !strings.Contains(got, "reset is refused on this port") {
		t.Errorf("reset: %d %s, want 403 with the reason", resp.StatusCode, got)
	}
	for _, path := range []string{httpapi.PathCheck, httpapi.PathPeek} {
		if resp, got := postJSON(t, srv, path, "", body); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", path, resp.StatusCode, got)
		}
	}
}
