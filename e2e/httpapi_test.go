package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
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

// The HTTP/JSON API: floodgate.v1.RateLimiter as POST
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
	alignDurations(a, b)
	return proto.Equal(a, b)
}

// alignDurations sets each retry_after and reset_after of b to a's when
// the two are less than a second apart: two calls a few ms apart (on
// Redis, by Redis' own clock) answer durations that differ by that much,
// and rounding each to a second could still split them at a half second.
func alignDurations(a, b proto.Message) {
	align := func(x *durationpb.Duration, y **durationpb.Duration) {
		d := x.AsDuration() - (*y).AsDuration()
		if d > -time.Second && d < time.Second {
			*y = x
		}
	}
	switch ra := a.(type) {
	case *floodgatev1.CheckResponse:
		rb := b.(*floodgatev1.CheckResponse)
		align(ra.RetryAfter, &rb.RetryAfter)
		align(ra.ResetAfter, &rb.ResetAfter)
	case *floodgatev1.PeekResponse:
		rb := b.(*floodgatev1.PeekResponse)
		align(ra.RetryAfter, &rb.RetryAfter)
		align(ra.ResetAfter, &rb.ResetAfter)
	case *floodgatev1.CheckBatchResponse:
		rb := b.(*floodgatev1.CheckBatchResponse)
		for i := range min(len(ra.Results), len(rb.Results)) {
			alignDurations(ra.Results[i], rb.Results[i])
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
// naming the field, nested ones too), no JSON Content-Type from a web
// page's origin (415), a body
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
		// From a page on another origin (a browser sends Origin with every
		// POST): only JSON, which needs a preflight, is read.
		a := postWith(t, p, tc.path, tc.body, map[string]string{"Content-Type": tc.ctype, "Origin": "https://page.example"})
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
