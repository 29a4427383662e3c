package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// The HTTP/JSON API (issue 17): floodgate.v1.RateLimiter as POST
// /v1/check, /v1/check:batch, /v1/peek and /v1/reset on --http-addr.

// httpAPIRules are the policies of the HTTP API tests.
const httpAPIRules = `domain: e2e
policies:
  login: {algorithm: sliding_window, requests: 3, period: 15m, failure_mode: closed}
  api:   {algorithm: token_bucket, requests: 60, period: 1m, burst: 4}
`

// The tokens of the HTTP API tests.
const (
	httpUserToken  = "edge-worker-token-7Hq2mR"
	httpAdminToken = "ops-admin-token-Pz81Lw0q"
)

// httpAPIBackends start floodgate with the rules and tokens on each store.
var httpAPIBackends = []struct {
	name  string
	start func(t *testing.T, args ...string) *proc
}{
	{"embedded", func(t *testing.T, args ...string) *proc { return startServe(t, args...) }},
	{"redis", func(t *testing.T, args ...string) *proc {
		r := redistest.StartServer(t)
		return startServe(t, append(args, "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "2s")...)
	}},
}

// startHTTPAPI starts floodgate with the HTTP API's rules and tokens.
func startHTTPAPI(t *testing.T, start func(t *testing.T, args ...string) *proc, args ...string) *proc {
	t.Helper()
	tokens := writeFile(t, t.TempDir(), "tokens", []byte(httpAdminToken+" admin\n"+httpUserToken+"\n"))
	return start(t, append([]string{"--config", writeRules(t, httpAPIRules), "--auth-token-file", tokens}, args...)...)
}

// httpAnswer is one answer of the HTTP API.
type httpAnswer struct {
	status int
	header http.Header
	body   []byte
}

// post sends body to path with the token ("" for none) as JSON.
func post(t *testing.T, p *proc, path, token, body string) httpAnswer {
	t.Helper()
	return postWith(t, p, path, body, map[string]string{"Authorization": bearer(token), "Content-Type": "application/json"})
}

func bearer(token string) string {
	if token == "" {
		return ""
	}
	return "Bearer " + token
}

// postWith sends body to path with exactly these headers (empty values
// left out).
func postWith(t *testing.T, p *proc, path, body string, headers map[string]string) httpAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+p.HTTPAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) httpAnswer {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpAnswer{resp.StatusCode, resp.Header, b}
}

// apiError is an error answer's body.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// errorOf decodes an error answer, failing the test when it is not one.
func errorOf(t *testing.T, a httpAnswer) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(a.body, &e); err != nil || e.Code == "" {
		t.Fatalf("answer %d %s is not a JSON error (%v)", a.status, a.body, err)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error answer's Content-Type %q, want application/json", ct)
	}
	return e
}

// rpcStep is one request sent through both front doors.
type rpcStep struct {
	name  string
	rpc   string // Check, CheckBatch, Peek or Reset
	token string
	req   func(key string) proto.Message
}

// paths of the RPCs over HTTP.
var rpcPaths = map[string]string{"Check": "/v1/check", "CheckBatch": "/v1/check:batch", "Peek": "/v1/peek", "Reset": "/v1/reset"}

func inlineTB(key string, requests int64, cost int64) *floodgatev1.CheckRequest {
	return &floodgatev1.CheckRequest{Key: key, Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Cost: cost,
		Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: requests, Period: durationpb.New(time.Hour)}}}
}

func policyOf(key, policy string) *floodgatev1.CheckRequest {
	return &floodgatev1.CheckRequest{Key: key, Source: &floodgatev1.CheckRequest_Policy{Policy: policy}}
}

func peekPolicy(key, policy string) *floodgatev1.PeekRequest {
	return &floodgatev1.PeekRequest{Key: key, Source: &floodgatev1.PeekRequest_Policy{Policy: policy}}
}

// rpcSteps run in order, on one key per front door: every RPC, allowed
// and denied answers, and the errors (validation, unknown policy, auth).
var rpcSteps = []rpcStep{
	{"check inline allowed", "Check", httpUserToken, func(k string) proto.Message { return inlineTB(k, 2, 1) }},
	{"check inline allowed, last", "Check", httpUserToken, func(k string) proto.Message { return inlineTB(k, 2, 1) }},
	{"check inline denied", "Check", httpUserToken, func(k string) proto.Message { return inlineTB(k, 2, 1) }},
	{"check policy", "Check", httpUserToken, func(k string) proto.Message { return policyOf(k, "login") }},
	{"peek policy", "Peek", httpUserToken, func(k string) proto.Message { return peekPolicy(k, "login") }},
	{"batch allowed", "CheckBatch", httpUserToken, func(k string) proto.Message {
		return &floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{policyOf(k, "login"), policyOf(k, "api")}}
	}},
	{"batch denied (inline spent)", "CheckBatch", httpUserToken, func(k string) proto.Message {
		return &floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{policyOf(k, "api"), inlineTB(k, 2, 1)}}
	}},
	{"peek after the denied batch", "Peek", httpUserToken, func(k string) proto.Message { return peekPolicy(k, "api") }},
	{"reset by a user", "Reset", httpUserToken, func(k string) proto.Message { return &floodgatev1.ResetRequest{Key: k} }},
	{"reset by an admin", "Reset", httpAdminToken, func(k string) proto.Message { return &floodgatev1.ResetRequest{Key: k} }},
	{"check after reset", "Check", httpUserToken, func(k string) proto.Message { return policyOf(k, "login") }},
	{"empty key", "Check", httpUserToken, func(string) proto.Message { return inlineTB("", 2, 1) }},
	{"cost above capacity", "Check", httpUserToken, func(k string) proto.Message { return inlineTB(k, 2, 3) }},
	{"no limit", "Peek", httpUserToken, func(k string) proto.Message { return &floodgatev1.PeekRequest{Key: k} }},
	{"batch with a bad check", "CheckBatch", httpUserToken, func(k string) proto.Message {
		return &floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{policyOf(k, "api"), inlineTB(k, 0, 1)}}
	}},
	{"empty batch", "CheckBatch", httpUserToken, func(string) proto.Message { return &floodgatev1.CheckBatchRequest{} }},
	{"unknown policy", "Check", httpUserToken, func(k string) proto.Message { return policyOf(k, "nope") }},
	{"no token", "Check", "", func(k string) proto.Message { return policyOf(k, "api") }},
	{"unknown token", "Check", "not-a-token", func(k string) proto.Message { return policyOf(k, "api") }},
}

// grpcCall runs one step over gRPC.
func grpcCall(ctx context.Context, c floodgatev1.RateLimiterClient, rpc string, req proto.Message) (proto.Message, error) {
	switch rpc {
	case "Check":
		return c.Check(ctx, req.(*floodgatev1.CheckRequest))
	case "CheckBatch":
		return c.CheckBatch(ctx, req.(*floodgatev1.CheckBatchRequest))
	case "Peek":
		return c.Peek(ctx, req.(*floodgatev1.PeekRequest))
	case "Reset":
		return c.Reset(ctx, req.(*floodgatev1.ResetRequest))
	}
	panic("unknown rpc " + rpc)
}

// newResponse is an empty response of rpc.
func newResponse(rpc string) proto.Message {
	switch rpc {
	case "Check":
		return &floodgatev1.CheckResponse{}
	case "CheckBatch":
		return &floodgatev1.CheckBatchResponse{}
	case "Peek":
		return &floodgatev1.PeekResponse{}
	}
	return &floodgatev1.ResetResponse{}
}

// TestHTTPAPIMatchesGRPC: every RPC over HTTP/JSON answers what gRPC
// answers to the same request, on both stores: the same decisions (the
// body is the response's protojson, every field present), and the same
// errors (the gRPC code's name and message, the code's HTTP status).
// Durations may differ by the time between the two calls.
func TestHTTPAPIMatchesGRPC(t *testing.T) {
	for _, b := range httpAPIBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := startHTTPAPI(t, b.start)
			c := p.Client(t)
			httpKey, grpcKey := "user:http", "user:grpc"
			for _, step := range rpcSteps {
				// The two front doors' keys differ, so the messages must
				// not name them; none does.
				gReq, hReq := step.req(grpcKey), step.req(httpKey)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if step.token != "" {
					ctx = withToken(ctx, step.token)
				}
				gResp, gErr := grpcCall(ctx, c, step.rpc, gReq)
				cancel()
				js, err := protojson.Marshal(hReq)
				if err != nil {
					t.Fatal(err)
				}
				a := post(t, p, rpcPaths[step.rpc], step.token, string(js))

				if gErr != nil {
					st := status.Convert(gErr)
					e := errorOf(t, a)
					if a.status != wantHTTPStatus[st.Code()] || e.Code != codeNames[st.Code()] || e.Message != st.Message() {
						t.Errorf("%s: HTTP %d %+v, want %d {%s %q} as gRPC answered", step.name, a.status, e, wantHTTPStatus[st.Code()], codeNames[st.Code()], st.Message())
					}
					continue
				}
				if a.status != http.StatusOK {
					t.Errorf("%s: HTTP %d %s, want 200 with %v", step.name, a.status, a.body, gResp)
					continue
				}
				hResp := newResponse(step.rpc)
				if err := protojson.Unmarshal(a.body, hResp); err != nil {
					t.Fatalf("%s: answer %s: %v", step.name, a.body, err)
				}
				if !sameAnswer(gResp, hResp) {
					t.Errorf("%s:\nHTTP %v\ngRPC %v", step.name, hResp, gResp)
				}
				if step.rpc != "Reset" && !bytes.Contains(a.body, []byte(`"allowed":`)) {
					t.Errorf("%s: answer %s leaves out allowed", step.name, a.body)
				}
			}
		})
	}
}

// wantHTTPStatus and codeNames are what the README promises per code.
var (
	wantHTTPStatus = map[codes.Code]int{
		codes.InvalidArgument: 400, codes.Unauthenticated: 401, codes.PermissionDenied: 403,
		codes.NotFound: 404, codes.Unavailable: 503, codes.DeadlineExceeded: 504, codes.Internal: 500,
	}
	codeNames = map[codes.Code]string{
		codes.InvalidArgument: "INVALID_ARGUMENT", codes.Unauthenticated: "UNAUTHENTICATED", codes.PermissionDenied: "PERMISSION_DENIED",
		codes.NotFound: "NOT_FOUND", codes.Unavailable: "UNAVAILABLE", codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.Internal: "INTERNAL",
	}
)

// sameAnswer compares two responses, durations within a second.
func sameAnswer(a, b proto.Message) bool {
	a, b = proto.Clone(a), proto.Clone(b)
	for _, m := range []proto.Message{a, b} {
		roundDurations(m)
	}
	return proto.Equal(a, b)
}

// roundDurations rounds every retry_after and reset_after to whole
// seconds, up, so calls a few ms apart compare equal.
func roundDurations(m proto.Message) {
	round := func(d *durationpb.Duration) *durationpb.Duration {
		return durationpb.New(d.AsDuration().Round(time.Second))
	}
	switch r := m.(type) {
	case *floodgatev1.CheckResponse:
		r.RetryAfter, r.ResetAfter = round(r.RetryAfter), round(r.ResetAfter)
	case *floodgatev1.PeekResponse:
		r.RetryAfter, r.ResetAfter = round(r.RetryAfter), round(r.ResetAfter)
	case *floodgatev1.CheckBatchResponse:
		for _, c := range r.Results {
			roundDurations(c)
		}
	}
}

// TestHTTPAPIAuth: the gRPC side's tokens and roles, checked before the
// body is read: no token or an unknown one is 401 with WWW-Authenticate
// (even when the body is not JSON), a user token may check but not reset
// (403), an admin token may reset.
func TestHTTPAPIAuth(t *testing.T) {
	p := startHTTPAPI(t, httpAPIBackends[0].start)
	check := `{"key":"a","policy":"api"}`
	for _, tc := range []struct {
		name, path, auth, body string
		status                 int
		code                   string
	}{
		{"no token", "/v1/check", "", check, 401, "UNAUTHENTICATED"},
		{"no token, bad body", "/v1/check", "", "{", 401, "UNAUTHENTICATED"},
		{"unknown token", "/v1/check", "Bearer nope", check, 401, "UNAUTHENTICATED"},
		{"not a bearer", "/v1/check", "Basic " + httpUserToken, check, 401, "UNAUTHENTICATED"},
		{"user token", "/v1/check", "Bearer " + httpUserToken, check, 200, ""},
		{"user token, lower-case scheme", "/v1/check", "bearer " + httpUserToken, check, 200, ""},
		{"user token resets", "/v1/reset", "Bearer " + httpUserToken, `{"key":"a"}`, 403, "PERMISSION_DENIED"},
		{"admin token resets", "/v1/reset", "Bearer " + httpAdminToken, `{"key":"a"}`, 200, ""},
	} {
		a := postWith(t, p, tc.path, tc.body, map[string]string{"Authorization": tc.auth, "Content-Type": "application/json"})
		if a.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, a.status, a.body, tc.status)
			continue
		}
		if tc.code == "" {
			continue
		}
		if e := errorOf(t, a); e.Code != tc.code {
			t.Errorf("%s: code %s, want %s", tc.name, e.Code, tc.code)
		}
		if tc.status == 401 && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q, want Bearer", tc.name, a.header.Get("WWW-Authenticate"))
		}
	}
	if strings.Contains(p.logs.String(), httpUserToken) || strings.Contains(p.logs.String(), httpAdminToken) {
		t.Errorf("a token reached the logs:\n%s", p.logs)
	}
}

// TestHTTPAPIBadRequests: what is not a request is refused before any
// decision: malformed JSON and wrong types (400), unknown fields (400
// naming the field, nested ones too), no JSON Content-Type (415), a body
// over --max-recv-msg-bytes (413), another method (405), another path
// (404); each a JSON error. The limit of one key is not touched.
func TestHTTPAPIBadRequests(t *testing.T) {
	p := startServe(t, "--max-recv-msg-bytes", "1024")
	tb := `"algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":1,"period":"3600s"}`
	for _, tc := range []struct {
		name, path, ctype, body string
		status                  int
		code, inMessage         string
	}{
		{"syntax", "/v1/check", "application/json", `{"key":`, 400, "INVALID_ARGUMENT", "floodgate.v1.CheckRequest"},
		{"not an object", "/v1/check", "application/json", `[1]`, 400, "INVALID_ARGUMENT", "floodgate.v1.CheckRequest"},
		{"unknown field", "/v1/check", "application/json", `{"key":"k",` + tb + `,"costs":2}`, 400, "INVALID_ARGUMENT", `unknown field "costs"`},
		{"unknown nested field", "/v1/check", "application/json", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":1,"period":"3600s","brust":2}}`, 400, "INVALID_ARGUMENT", `unknown field "brust"`},
		{"unknown field in a batch", "/v1/check:batch", "application/json", `{"checks":[{"key":"k",` + tb + `,"polcy":"x"}]}`, 400, "INVALID_ARGUMENT", `unknown field "polcy"`},
		{"wrong type", "/v1/check", "application/json", `{"key":"k",` + tb + `,"cost":"lots"}`, 400, "INVALID_ARGUMENT", "cost"},
		{"unknown enum", "/v1/peek", "application/json", `{"key":"k","algorithm":"ALGORITHM_GUESS"}`, 400, "INVALID_ARGUMENT", "ALGORITHM_GUESS"},
		{"bad duration", "/v1/check", "application/json", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":1,"period":"an hour"}}`, 400, "INVALID_ARGUMENT", "Duration"},
		{"validation", "/v1/check", "application/json", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":1}}`, 400, "INVALID_ARGUMENT", "limit.period: required"},
		{"form", "/v1/check", "application/x-www-form-urlencoded", `{"key":"k",` + tb + `}`, 415, "INVALID_ARGUMENT", "Content-Type must be application/json"},
		{"text", "/v1/check", "text/plain", `{"key":"k",` + tb + `}`, 415, "INVALID_ARGUMENT", "Content-Type"},
		{"no type", "/v1/check", "", `{"key":"k",` + tb + `}`, 415, "INVALID_ARGUMENT", "got none"},
		{"too big", "/v1/check", "application/json", `{"key":"` + strings.Repeat("k", 1100) + `"}`, 413, "RESOURCE_EXHAUSTED", "1024 bytes"},
		{"no route", "/v1/checks", "application/json", `{}`, 404, "NOT_FOUND", "/v1/checks"},
	} {
		a := postWith(t, p, tc.path, tc.body, map[string]string{"Content-Type": tc.ctype})
		if a.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, a.status, a.body, tc.status)
			continue
		}
		if e := errorOf(t, a); e.Code != tc.code || !strings.Contains(e.Message, tc.inMessage) {
			t.Errorf("%s: %+v, want code %s and a message containing %q", tc.name, e, tc.code, tc.inMessage)
		}
	}
	// None of them charged the key: its one request is still there.
	if a := post(t, p, "/v1/check", "", `{"key":"k",`+tb+`}`); a.status != 200 || !bytes.Contains(a.body, []byte(`"allowed":true`)) {
		t.Errorf("after the refused requests: %d %s, want allowed", a.status, a.body)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.HTTPAddr+"/v1/check", nil)
	if a := do(t, req); a.status != 405 || a.header.Get("Allow") != "POST" {
		t.Errorf("GET /v1/check: %d (Allow %q) %s, want 405 with Allow: POST", a.status, a.header.Get("Allow"), a.body)
	}
}

// TestHTTPAPISlowBody: a body that stops coming is answered 408 within
// --unary-timeout, like a gRPC call whose message never comes; the
// connection does not stay held.
func TestHTTPAPISlowBody(t *testing.T) {
	p := startServe(t, "--unary-timeout", "500ms")
	conn, err := net.Dial("tcp", p.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"key\":")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(conn)
	took := time.Since(start)
	if !bytes.HasPrefix(b, []byte("HTTP/1.1 408")) || !bytes.Contains(b, []byte(`"DEADLINE_EXCEEDED"`)) {
		t.Errorf("a stalled body got %q, want 408 DEADLINE_EXCEEDED", b)
	}
	if took > 5*time.Second {
		t.Errorf("answered after %v, want about the 500ms timeout", took)
	}
}

// TestHTTPAPIHeaders: allowed and denied answers carry the RateLimit,
// RateLimit-Policy and X-RateLimit-* headers of their limit (a policy by
// its name and quota, an inline limit as "inline"), Retry-After on a
// denial only; a batch's headers describe its denied check. On both
// stores.
func TestHTTPAPIHeaders(t *testing.T) {
	for _, b := range httpAPIBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := startHTTPAPI(t, b.start)
			check := func(body string) httpAnswer { return post(t, p, "/v1/check", httpUserToken, body) }
			login := `{"key":"hdr","policy":"login"}`
			steps := []struct {
				name string
				a    httpAnswer
				want map[string]string
			}{
				{"login 1 of 3", check(login), map[string]string{
					"RateLimit-Policy":  `"login";q=3;w=900`,
					"X-RateLimit-Limit": "3, 3;w=900", "X-RateLimit-Remaining": "2", "Retry-After": ""}},
				{"login 2 of 3", check(login), map[string]string{"X-RateLimit-Remaining": "1", "Retry-After": ""}},
				{"login 3 of 3", check(login), map[string]string{"X-RateLimit-Remaining": "0", "Retry-After": ""}},
				{"login denied", check(login), map[string]string{
					"RateLimit-Policy": `"login";q=3;w=900`, "X-RateLimit-Remaining": "0", "Retry-After": "?"}},
				// 60/min burst 4: q is the burst, w the 4s it takes to refill.
				{"api token bucket", check(`{"key":"hdr","policy":"api","cost":4}`), map[string]string{
					"RateLimit-Policy": `"api";q=4;w=4`, "RateLimit": `"api";r=0;t=4`, "Retry-After": ""}},
				{"inline", check(`{"key":"hdr","algorithm":"ALGORITHM_FIXED_WINDOW","limit":{"requests":10,"period":"3600s"}}`), map[string]string{
					"RateLimit-Policy": `"inline";q=10;w=3600`, "X-RateLimit-Remaining": "9", "Retry-After": ""}},
				{"batch denied by login", post(t, p, "/v1/check:batch", httpUserToken, `{"checks":[{"key":"other","policy":"api"},`+login+`]}`), map[string]string{
					"RateLimit-Policy": `"login";q=3;w=900`, "Retry-After": "?"}},
				{"peek", post(t, p, "/v1/peek", httpUserToken, `{"key":"fresh","policy":"login"}`), map[string]string{
					"RateLimit": `"login";r=3;t=0`, "Retry-After": ""}},
			}
			for _, s := range steps {
				if s.a.status != 200 {
					t.Errorf("%s: %d %s, want 200", s.name, s.a.status, s.a.body)
					continue
				}
				for k, v := range s.want {
					// "?": present, whatever its value (a sliding
					// window's wait depends on where in its window the
					// test runs).
					if got := s.a.header.Get(k); got != v && (v != "?" || got == "") {
						t.Errorf("%s: %s %q, want %q", s.name, k, got, v)
					}
				}
			}
			if !bytes.Contains(steps[3].a.body, []byte(`"allowed":false`)) {
				t.Errorf("a denial's body %s, want \"allowed\":false", steps[3].a.body)
			}
		})
	}
}

// TestHTTPAPICORS: CORS is off by default (no Access-Control-* header, a
// preflight is refused); --http-cors-origins approves its origins only.
func TestHTTPAPICORS(t *testing.T) {
	preflight := func(p *proc, origin string) httpAnswer {
		req, _ := http.NewRequest(http.MethodOptions, "http://"+p.HTTPAddr+"/v1/check", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		return do(t, req)
	}
	off := startServe(t)
	if a := preflight(off, "https://app.example"); a.header.Get("Access-Control-Allow-Origin") != "" || a.status < 400 {
		t.Errorf("CORS off: preflight answered %d with %v, want a refusal", a.status, a.header)
	}
	on := startServe(t, "--http-cors-origins", "https://app.example, https://admin.example")
	a := preflight(on, "https://app.example")
	if a.status != 204 || a.header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(a.header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("allowed origin: preflight %d %v", a.status, a.header)
	}
	if a := preflight(on, "https://evil.example"); a.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin: preflight approved: %v", a.header)
	}
	r := postWith(t, on, "/v1/check", `{"key":"c","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":1,"period":"1s"}}`,
		map[string]string{"Content-Type": "application/json", "Origin": "https://admin.example"})
	if r.header.Get("Access-Control-Allow-Origin") != "https://admin.example" || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Errorf("allowed origin's answer: %v", r.header)
	}
}

// TestHTTPAPIMetrics: the HTTP API's decisions are counted apart from
// gRPC's (api="http"), and its requests by route and status; both doors
// share the key's count.
func TestHTTPAPIMetrics(t *testing.T) {
	p := startServe(t)
	body := `{"key":"m","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":1,"period":"3600s"}}`
	post(t, p, "/v1/check", "", body)
	post(t, p, "/v1/check", "", body)
	post(t, p, "/v1/check", "", `{`)
	if _, err := p.Client(t).Check(context.Background(), inlineTB("m", 1, 1)); err != nil {
		t.Fatal(err)
	}
	_, metrics := httpGet(t, p, "/metrics")
	for _, want := range []string{
		`floodgate_decisions_total{algorithm="token_bucket",api="http",domain="",result="allowed",rule="inline"} 1`,
		`floodgate_decisions_total{algorithm="token_bucket",api="http",domain="",result="denied",rule="inline"} 1`,
		// One key, one count, whichever door: gRPC finds it spent.
		`floodgate_decisions_total{algorithm="token_bucket",api="check",domain="",result="denied",rule="inline"} 1`,
		`floodgate_http_requests_total{code="200",route="check"} 2`,
		`floodgate_http_requests_total{code="400",route="check"} 1`,
		`floodgate_http_request_duration_seconds_count{route="check"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestHTTPAPIOff: --http-api=false leaves /v1/ out.
func TestHTTPAPIOff(t *testing.T) {
	p := startServe(t, "--http-api=false")
	if a := post(t, p, "/v1/check", "", `{}`); a.status != 404 {
		t.Errorf("with --http-api=false: %d %s, want 404", a.status, a.body)
	}
}

// TestEdgeWorkerExample runs examples/edge-worker's tests (node --test)
// against this floodgate binary. Without Node.js 18 or later it is
// skipped, unless CI is set: CI must run it (scripts/ensure-redis.sh
// installs nodejs).
func TestEdgeWorkerExample(t *testing.T) {
	node, major, err := findNode()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and %v: install Node.js 18 or later (scripts/ensure-redis.sh installs nodejs)", err)
		}
		t.Skipf("skipping the edge worker example's test: %v (install Node.js 18 or later, or run scripts/ensure-redis.sh)", err)
	}
	args := []string{"--test"}
	if major == 18 {
		// Node 18 has fetch but keeps crypto (Web Crypto, which Workers
		// have) behind a flag; 19 and later have it on.
		args = append(args, "--experimental-global-webcrypto")
	}
	dir, err := filepath.Abs("../examples/edge-worker")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append(args, "worker.test.mjs")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FLOODGATE_BIN="+binary)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("node --test in examples/edge-worker: %v", err)
	}
	if !bytes.Contains(out, []byte("# pass ")) || bytes.Contains(out, []byte("# pass 0\n")) {
		t.Fatalf("node --test passed no test")
	}
}

// findNode finds node on PATH and its major version; an error when it is
// missing or older than 18 (no fetch, no node:test).
func findNode() (path string, major int, err error) {
	path, err = exec.LookPath("node")
	if err != nil {
		return "", 0, fmt.Errorf("node not found: %w", err)
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return "", 0, fmt.Errorf("node --version: %w", err)
	}
	v := strings.TrimSpace(string(out))
	if _, err := fmt.Sscanf(v, "v%d.", &major); err != nil {
		return "", 0, fmt.Errorf("node --version said %q", v)
	}
	if major < 18 {
		return "", 0, fmt.Errorf("node is %s, older than 18", v)
	}
	return path, major, nil
}

// TestReadmeCurl runs the README's "From an edge worker or curl" commands,
// as written, against the binary: grpcurl and curl answer the same.
func TestReadmeCurl(t *testing.T) {
	gc, err := grpcurl()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README's commands: apt-get install curl")
	}
	blocks := readmeBlocks(t, "## From an edge worker or curl")
	if len(blocks) != 1 {
		t.Fatalf("README's curl section has %d sh blocks, want 1", len(blocks))
	}
	p := startServe(t)
	script := strings.ReplaceAll(blocks[0], "127.0.0.1:8081", p.GRPCAddr)
	script = strings.ReplaceAll(script, "127.0.0.1:8080", p.HTTPAddr)
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(gc)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README commands failed: %v\n%s\n--- output:\n%s", err, script, out)
	}
	// grpcurl's Check, then curl's on the same key: 2, then 1 remaining.
	for _, want := range []string{
		`"remaining": "2"`,
		`{"allowed":true,"limit":"3","remaining":"1",`,
		`{"allowed":true,"results":[`,
		`{"allowed":true,"limit":"3","remaining":"1",`, // the peek charges nothing
		"{}\n", // the reset
	} {
		i := strings.Index(string(out), want)
		if i < 0 {
			t.Fatalf("README commands' output lacks %s (in order):\n%s", want, out)
		}
		out = out[i+len(want):]
	}
}
