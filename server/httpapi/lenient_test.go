package httpapi_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/httpapi"
	"github.com/floodgate/floodgate/store/memstore"
)

// send posts body to path with the given headers (none: no Content-Type).
func send(t *testing.T, url, body string, headers map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

var jsonType = map[string]string{"Content-Type": "application/json"}

// TestLenientSpellings: algorithm names and durations as people type
// them decide as protojson's spellings do: a token bucket emptied by a
// cost of its whole limit is full again after exactly its period, which
// the answer's resetAfter shows.
func TestLenientSpellings(t *testing.T) {
	srv := serve(t, server.NewRateLimiter(memstore.New(memstore.Config{}), server.CheckSettings{}), httpapi.Settings{})
	for i, tc := range []struct {
		algorithm, period string
		requests          int
		wantReset         string
	}{
		{"token_bucket", "1m", 3, `"resetAfter":"60s"`},
		{"TOKEN_BUCKET", "90s", 3, `"resetAfter":"90s"`},
		{"ALGORITHM_TOKEN_BUCKET", "1h30m", 3, `"resetAfter":"5400s"`},
		{"token-bucket", "60s", 3, `"resetAfter":"60s"`},
		{"Token_Bucket", "250ms", 1, `"resetAfter":"0.250s"`},
		{"token_bucket", "1.5s", 3, `"resetAfter":"1.500s"`},
		{"token_bucket", "1m30.5s", 1, `"resetAfter":"90.500s"`},
		{"1", "2s", 2, `"resetAfter":"2s"`}, // an enum by number, as protojson takes it
	} {
		key := `"k` + string(rune('a'+i)) + `"`
		body := `{"key":` + key + `,"algorithm":"` + tc.algorithm + `","cost":` + strconv.Itoa(tc.requests) + `,"limit":{"requests":` + strconv.Itoa(tc.requests) + `,"period":"` + tc.period + `"}}`
		if tc.algorithm == "1" {
			body = strings.Replace(body, `"1"`, `1`, 1)
		}
		code, _, got := send(t, srv.URL+httpapi.PathCheck, body, jsonType)
		if code != 200 || !strings.Contains(got, `"allowed":true`) || !strings.Contains(got, tc.wantReset) {
			t.Errorf("%s: %d %s, want 200 allowed with %s", body, code, got, tc.wantReset)
		}
	}

	// The request people type, three times allowed, then denied.
	body := `{"key":"k","algorithm":"token_bucket","limit":{"requests":3,"period":"1m"}}`
	for i := 1; i <= 4; i++ {
		code, _, got := send(t, srv.URL+httpapi.PathCheck, body, nil)
		want := `"allowed":true`
		if i == 4 {
			want = `"allowed":false`
		}
		if code != 200 || !strings.Contains(got, want) {
			t.Errorf("check %d: %d %s, want 200 with %s", i, code, got, want)
		}
	}

	// Nested: a batch's checks, and a policy-free sliding window.
	batch := `{"checks":[{"key":"b1","algorithm":"sliding_window","limit":{"requests":2,"period":"10m"}},{"key":"b2","algorithm":"fixed_window","limit":{"requests":2,"period":"1h"}}]}`
	if code, _, got := send(t, srv.URL+httpapi.PathCheckBatch, batch, jsonType); code != 200 || strings.Count(got, `"limit":"2"`) != 2 {
		t.Errorf("batch: %d %s, want 200 with two results of limit 2", code, got)
	}
}

// TestLenientRefusals: what is still no algorithm or duration is a 400
// naming the field, and a malformed body is explained as before.
func TestLenientRefusals(t *testing.T) {
	srv := serve(t, server.NewRateLimiter(memstore.New(memstore.Config{}), server.CheckSettings{}), httpapi.Settings{})
	for _, tc := range []struct{ body, want string }{
		{`{"key":"k","algorithm":"bucket","limit":{"requests":3,"period":"1m"}}`, `algorithm`},
		{`{"key":"k","algorithm":"token_bucket","limit":{"requests":3,"period":"1 minute"}}`, `google.protobuf.Duration`},
		{`{"key":"k","algorithm":"token_bucket","limit":{"requests":3,"period":"1m"},"colour":"red"}`, `unknown field \"colour\"`},
		{`{"key":"k","algorithm":"token_bucket",`, `unexpected EOF`},
		{`{"key":"k","algorithm":"token_bucket","limit":{"requests":3,"period":"-1m"}}`, `period`},
	} {
		code, _, got := send(t, srv.URL+httpapi.PathCheck, tc.body, jsonType)
		if code != 400 || !strings.Contains(got, `"INVALID_ARGUMENT"`) || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %d %s, want 400 INVALID_ARGUMENT naming %s", tc.body, code, got, tc.want)
		}
	}
}

// TestLenientKeepsOtherBytes: only the rewritten values change; a key
// spelled with escapes, or named like an algorithm, reaches the limiter
// as sent (its count is the same key's whatever the algorithm's spelling).
func TestLenientKeepsOtherBytes(t *testing.T) {
	srv := serve(t, server.NewRateLimiter(memstore.New(memstore.Config{}), server.CheckSettings{}), httpapi.Settings{})
	first := `{"key":"token_bucket\u00e9\"1m\"","algorithm":"token_bucket","limit":{"requests":1,"period":"1m"}}`
	second := `{"key":"token_bucketé\"1m\"","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":1,"period":"60s"}}`
	if code, _, got := send(t, srv.URL+httpapi.PathCheck, first, jsonType); code != 200 || !strings.Contains(got, `"allowed":true`) {
		t.Fatalf("first: %d %s", code, got)
	}
	if code, _, got := send(t, srv.URL+httpapi.PathCheck, second, jsonType); code != 200 || !strings.Contains(got, `"allowed":false`) {
		t.Errorf("the same key spelled with protojson's names: %d %s, want denied (one key, one count)", code, got)
	}
}

// TestContentType: application/json always; another type or none only
// from a caller that is no web page (no Origin) or from an allowed
// origin. A page on another origin can send text/plain or a form without
// a preflight: that stays a 415.
func TestContentType(t *testing.T) {
	rl := server.NewRateLimiter(memstore.New(memstore.Config{}), server.CheckSettings{})
	srv := serve(t, rl, httpapi.Settings{AllowedOrigins: []string{"https://app.example"}})
	body := `{"key":"ct","algorithm":"token_bucket","limit":{"requests":100,"period":"1m"}}`
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"json", jsonType, 200},
		{"none", nil, 200},
		{"curl's form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 200},
		{"fetch's text", map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, 200},
		{"json from a page", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, 200},
		{"text from a page", map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}, 415},
		{"form from a page", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example"}, 415},
		{"none from a page", map[string]string{"Origin": "https://evil.example"}, 415},
		{"none from a sandboxed page", map[string]string{"Origin": "null"}, 415},
		{"text from an allowed page", map[string]string{"Content-Type": "text/plain", "Origin": "https://app.example"}, 200},
	} {
		code, _, got := send(t, srv.URL+httpapi.PathCheck, body, tc.headers)
		if code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, got, tc.want)
		}
		if code == 415 && !strings.Contains(got, "Content-Type must be application/json") {
			t.Errorf("%s: 415 says %s", tc.name, got)
		}
	}
}

// TestDenyStatus: a denial is a 200 by default; Settings.DenyStatus 429
// or ?deny_status=429 make it a 429 (body unchanged), ?deny_status=200
// asks for the default back; a peek is never a 429.
func TestDenyStatus(t *testing.T) {
	one := `{"key":"%s","algorithm":"token_bucket","limit":{"requests":1,"period":"1h"}}`
	key := 0
	spent := func(t *testing.T, url string) string {
		t.Helper()
		key++
		body := strings.Replace(one, "%s", "d"+strconv.Itoa(key), 1)
		if code, _, got := send(t, url+httpapi.PathCheck, body, jsonType); code != 200 {
			t.Fatalf("first check: %d %s", code, got)
		}
		return body
	}
	for _, tc := range []struct {
		name   string
		server int
		query  string
		want   int
	}{
		{"default", 0, "", 200},
		{"asked per request", 0, "?deny_status=429", 429},
		{"per server", 429, "", 429},
		{"per server, the request asks for 200", 429, "?deny_status=200", 200},
	} {
		rl := server.NewRateLimiter(memstore.New(memstore.Config{}), server.CheckSettings{})
		srv := serve(t, rl, httpapi.Settings{DenyStatus: tc.server})
		body := spent(t, srv.URL)
		code, h, got := send(t, srv.URL+httpapi.PathCheck+tc.query, body, jsonType)
		if code != tc.want || !strings.Contains(got, `"allowed":false`) || h.Get("Retry-After") == "" {
			t.Errorf("%s: check %d %s (Retry-After %q), want %d with allowed false and Retry-After", tc.name, code, got, h.Get("Retry-After"), tc.want)
		}
		batch := `{"checks":[` + body + `]}`
		if code, _, got := send(t, srv.URL+httpapi.PathCheckBatch+tc.query, batch, jsonType); code != tc.want || !strings.HasPrefix(got, `{"allowed":false`) {
			t.Errorf("%s: batch %d %s, want %d", tc.name, code, got, tc.want)
		}
		if code, _, got := send(t, srv.URL+httpapi.PathPeek+tc.query, body, jsonType); code != 200 || !strings.Contains(got, `"allowed":false`) {
			t.Errorf("%s: peek %d %s, want 200 (a peek only tells)", tc.name, code, got)
		}
		allowed := strings.Replace(body, `"requests":1`, `"requests":5`, 1)
		allowed = strings.Replace(allowed, `"key":"d`, `"key":"fresh-d`, 1)
		if code, _, got := send(t, srv.URL+httpapi.PathCheck+tc.query, allowed, jsonType); code != 200 {
			t.Errorf("%s: an allowed check %d %s, want 200", tc.name, code, got)
		}
	}
	srv := serve(t, server.NewRateLimiter(memstore.New(memstore.Config{}), server.CheckSettings{}), httpapi.Settings{})
	if code, _, got := send(t, srv.URL+httpapi.PathCheck+"?deny_status=403", strings.Replace(one, "%s", "x", 1), jsonType); code != 400 || !strings.Contains(got, "deny_status: want 200 or 429") {
		t.Errorf("?deny_status=403: %d %s, want 400 naming the choice", code, got)
	}
}

// TestEnvoyJSON: POST /json takes Envoy's RateLimitRequest as JSON and
// answers its RateLimitResponse as protojson writes it, 200 while OK and
// 429 once over the limit; a body that is no request is a 400 saying why.
func TestEnvoyJSON(t *testing.T) {
	cfg, err := rules.Parse("json.yaml", []byte(`domain: dummy
descriptors:
  - key: perday
    rate_limit: {unit: day, requests_per_unit: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Config{})
	s := server.Settings{Rules: testkit.StaticRules(cfg)}
	srv := serve(t, server.NewRateLimiter(st, server.CheckSettings{Settings: s}), httpapi.Settings{Envoy: server.NewEnvoy(st, server.EnvoySettings{Settings: s})})
	req := `{"domain": "dummy", "descriptors": [{"entries": [{"key": "perday"}]}]}`
	for i, want := range []int{200, 200, 429} {
		// curl --data sends a form's Content-Type; the reference takes it.
		code, h, got := send(t, srv.URL+httpapi.PathEnvoyJSON, req, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		// protojson leaves zeros out: the second answer has no limitRemaining.
		wantCode := `{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":2,"unit":"DAY"},"limitRemaining":1,`
		if i == 1 {
			wantCode = `{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":2,"unit":"DAY"},"durationUntilReset":`
		}
		if want == 429 {
			wantCode = `{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":2,"unit":"DAY"}`
		}
		if code != want || !strings.HasPrefix(got, wantCode) || h.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: %d %s %s, want %d starting %s", i+1, code, h.Get("Content-Type"), got, want, wantCode)
		}
	}
	if code, _, got := send(t, srv.URL+httpapi.PathEnvoyJSON, `{"domain": "dummy", "descriptor": []}`, nil); code != 400 || !strings.Contains(got, `unknown field \"descriptor\"`) {
		t.Errorf("a misspelt field: %d %s, want 400 naming it", code, got)
	}
	if code, _, got := send(t, srv.URL+httpapi.PathEnvoyJSON, `{"domain": "dummy"}`, map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}); code != 415 {
		t.Errorf("text/plain from another origin's page: %d %s, want 415", code, got)
	}
	resp, err := http.Get(srv.URL + httpapi.PathEnvoyJSON)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET /json: %d, want 405", resp.StatusCode)
	}
}
