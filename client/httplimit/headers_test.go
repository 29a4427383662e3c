package httplimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/httplimit"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
	"github.com/floodgate/floodgate/internal/testkit/sfv"
)

// oldFields are the fields of the superseded draft the middleware wrote
// while the Envoy API wrote RateLimit and RateLimit-Policy.
var oldFields = []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}

// quotaFields are every field that describes a quota.
var quotaFields = []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}

// TestMiddlewareHeaderScheme: the middleware wrote the
// old RateLimit-Limit/-Remaining/-Reset fields and a Unix-time
// X-RateLimit-Reset, while the Envoy API wrote RateLimit/RateLimit-Policy
// and a delay. Both now write one scheme, parseable as Structured Fields;
// a token bucket advertises its burst over its refill time.
func TestMiddlewareHeaderScheme(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	h := httplimit.Middleware(c, httplimit.Config{
		Limit: client.Limit{Algorithm: algorithms.TokenBucket, Requests: 60, Period: time.Minute, Burst: 2},
	})(ok)

	w := get(h, "192.0.2.1:1")
	wantFields(t, "first", w.Header(), map[string]string{
		"RateLimit-Policy":      `"ip";q=2;w=2`,
		"RateLimit":             `"ip";r=1;t=1`,
		"X-RateLimit-Limit":     "2, 2;w=2",
		"X-RateLimit-Remaining": "1",
		"X-RateLimit-Reset":     "1", // a delay, as draft-03 and the Envoy API say
	})
	get(h, "192.0.2.1:1")
	w = get(h, "192.0.2.1:1")
	if w.Code != 429 {
		t.Fatalf("third: got %d, want 429", w.Code)
	}
	wantFields(t, "denied", w.Header(), map[string]string{
		"RateLimit":   `"ip";r=0;t=2`,
		"Retry-After": "1",
	})
	w = get(h, "192.0.2.2:1", "X-API-Key", "k")
	wantFields(t, "keyed", w.Header(), map[string]string{"RateLimit-Policy": `"apikey";q=2;w=2`})

	// A named policy: its window is the server's, unknown here.
	cfg := floodgatetest.StaticRules(t, "policies:\n  login: {algorithm: sliding_window, requests: 5, period: 15m}\n")
	paddr, _ := floodgatetest.Start(t, cfg)
	ph := httplimit.Middleware(floodgatetest.Dial(t, paddr), httplimit.Config{Limit: client.Policy("login")})(ok)
	wantFields(t, "policy", get(ph, "192.0.2.1:1").Header(), map[string]string{
		"RateLimit-Policy":  "",
		"RateLimit":         `"login";r=4;t=1800`,
		"X-RateLimit-Limit": "5",
	})
}

// TestMiddlewareDegradedHeaders: a degraded answer wrote
// X-RateLimit-Remaining: 0 and a reset of now ("none left, retry now").
// Now it writes X-RateLimit-Degraded and, when denied, Retry-After only.
func TestMiddlewareDegradedHeaders(t *testing.T) {
	cfg := floodgatetest.StaticRules(t, "policies:\n  login: {algorithm: sliding_window, requests: 5, period: 15m, failure_mode: closed}\n")
	c := floodgatetest.Dial(t, floodgatetest.StartDegraded(t, cfg)) // inline limits fail open
	w := get(httplimit.Middleware(c, httplimit.Config{Limit: perMinute3})(ok), "192.0.2.1:1")
	if w.Code != 200 || w.Header().Get("X-RateLimit-Degraded") != "true" {
		t.Fatalf("open: got %d %v", w.Code, w.Header())
	}
	wantFields(t, "open", w.Header(), map[string]string{"Retry-After": ""})
	w = get(httplimit.Middleware(c, httplimit.Config{Limit: client.Policy("login")})(ok), "192.0.2.1:1")
	if w.Code != 429 || w.Header().Get("X-RateLimit-Degraded") != "true" {
		t.Fatalf("closed: got %d %v", w.Code, w.Header())
	}
	wantFields(t, "closed", w.Header(), map[string]string{"Retry-After": "1"})
}

// wantFields checks the fields named in want ("" means absent), that no
// quota field is there when want says none, that the old fields are gone,
// and that every rate-limit field parses as the Structured Field it is.
func wantFields(t *testing.T, step string, h http.Header, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %s is %q, want %q (all: %v)", step, k, got, v, h)
		}
	}
	for _, k := range oldFields {
		if v := h.Get(k); v != "" {
			t.Errorf("%s: the superseded %s: %q is still written", step, k, v)
		}
	}
	if h.Get("X-RateLimit-Degraded") != "" {
		for _, k := range quotaFields {
			if v := h.Get(k); v != "" {
				t.Errorf("%s: degraded, yet %s: %q", step, k, v)
			}
		}
	}
	for _, k := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit"} {
		if v := h.Get(k); v != "" {
			if _, err := sfv.ParseList(v); err != nil {
				t.Errorf("%s: %s: %v", step, k, err)
			}
		}
	}
	for _, k := range []string{"X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if v := h.Get(k); v != "" {
			if it, err := sfv.ParseItem(v); err != nil {
				t.Errorf("%s: %s: %v", step, k, err)
			} else if _, ok := it.Value.(int64); !ok {
				t.Errorf("%s: %s: %q is not an Integer", step, k, v)
			}
		}
	}
}
