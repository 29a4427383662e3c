package httplimit_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/httplimit"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

var perMinute3 = client.Limit{Algorithm: algorithms.TokenBucket, Requests: 3, Period: time.Minute}

// ok is the protected handler.
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

// get runs one request from remoteAddr with the given headers (pairs).
func get(h http.Handler, remoteAddr string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/v1/things", nil)
	r.RemoteAddr = remoteAddr
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// wantResponse checks a response's status, rate-limit headers and body.
func wantResponse(t *testing.T, what string, w *httptest.ResponseRecorder, code int, headers map[string]string, body string) {
	t.Helper()
	if w.Code != code {
		t.Fatalf("%s: got status %d, want %d (body %q)", what, w.Code, code, w.Body.String())
	}
	for _, k := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if got, want := w.Header().Get(k), headers[k]; got != want {
			t.Fatalf("%s: header %s: got %q, want %q", what, k, got, want)
		}
	}
	if got := w.Body.String(); got != body {
		t.Fatalf("%s: got body %q, want %q", what, got, body)
	}
}

// TestMiddlewareHeaders: allowed requests get the numbers; the denied one
// gets 429, Retry-After and the JSON body.
func TestMiddlewareHeaders(t *testing.T) {
	addr, clock := floodgatetest.Start(t, nil)
	h := httplimit.Middleware(floodgatetest.Dial(t, addr), httplimit.Config{
		Limit: client.Limit{Algorithm: algorithms.TokenBucket, Requests: 2, Period: time.Minute},
	})(ok)

	policy := map[string]string{"RateLimit-Policy": `"ip";q=2;w=60`, "X-RateLimit-Limit": "2, 2;w=60"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range policy {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	wantResponse(t, "first", get(h, "192.0.2.1:1234"), 200, with(
		"RateLimit", `"ip";r=1;t=30`, "X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "30"), "ok")
	wantResponse(t, "second", get(h, "192.0.2.1:1234"), 200, with(
		"RateLimit", `"ip";r=0;t=60`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"), "ok")
	w := get(h, "192.0.2.1:1234")
	wantResponse(t, "third", w, 429, with(
		"RateLimit", `"ip";r=0;t=60`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60", "Retry-After", "30"),
		`{"error":"rate_limited","retry_after_seconds":30}`+"\n")
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("429 Content-Type: got %q", ct)
	}

	// Waits round up to whole seconds, in every header.
	clock.Advance(29*time.Second + 100*time.Millisecond)
	wantResponse(t, "after 29.1s", get(h, "192.0.2.1:1234"), 429, with(
		"RateLimit", `"ip";r=0;t=31`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "31", "Retry-After", "1"),
		`{"error":"rate_limited","retry_after_seconds":1}`+"\n")
}

// TestMiddlewareKeys: an API key has its own limit, on top of its IP's;
// without one the client IP alone; X-Forwarded-For counts only behind
// configured proxies.
func TestMiddlewareKeys(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	one := client.Limit{Algorithm: algorithms.SlidingWindow, Requests: 1, Period: time.Minute}
	direct := httplimit.Middleware(c, httplimit.Config{Limit: one, KeyPrefix: "direct:"})(ok)
	proxied := httplimit.Middleware(c, httplimit.Config{Limit: one, KeyPrefix: "proxied:", TrustedProxyHops: 1, APIKeyHeader: "Authorization"})(ok)

	for i, tc := range []struct {
		h       http.Handler
		remote  string
		headers []string
		want    int
	}{
		{direct, "192.0.2.1:1", []string{"X-API-Key", "alice"}, 200},
		{direct, "192.0.2.2:1", []string{"X-API-Key", "alice"}, 429}, // the key, from anywhere
		{direct, "192.0.2.1:1", []string{"X-API-Key", "bob"}, 429},   // a fresh key, but the IP's limit is spent
		{direct, "192.0.2.3:1", []string{"X-API-Key", "bob"}, 200},
		{direct, "192.0.2.4:2", nil, 200}, // no key: the IP, any port
		{direct, "192.0.2.4:3", nil, 429},
		{direct, "192.0.2.4:4", []string{"X-Forwarded-For", "198.51.100.9"}, 429}, // XFF ignored by default
		{direct, "[2001:db8:1:2::1]:1", nil, 200},                                 // IPv6: the /64
		{direct, "[2001:db8:1:2::ffff]:1", nil, 429},
		{direct, "[2001:db8:1:3::1]:1", nil, 200},
		{direct, "[::ffff:192.0.2.7]:1", nil, 200}, // IPv4-mapped is IPv4
		{direct, "192.0.2.7:1", nil, 429},
		// Behind one trusted proxy: the last X-Forwarded-For entry; the
		// client's own (left) entries are ignored.
		{proxied, "10.0.0.1:1", []string{"X-Forwarded-For", "6.6.6.6, 198.51.100.1"}, 200},
		{proxied, "10.0.0.1:1", []string{"X-Forwarded-For", "7.7.7.7, 198.51.100.1"}, 429},
		{proxied, "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.2"}, 200},
		{proxied, "10.0.0.1:1", []string{"X-Forwarded-For", "6.6.6.6", "X-Forwarded-For", "198.51.100.2"}, 429},
		{proxied, "10.0.0.1:1", nil, 200}, // no header: the proxy's own address
		{proxied, "10.0.0.2:1", []string{"Authorization", "Bearer t"}, 200},
		{proxied, "10.0.0.3:1", []string{"Authorization", "Bearer t"}, 429},
	} {
		if got := get(tc.h, tc.remote, tc.headers...).Code; got != tc.want {
			t.Fatalf("request %d (%s %v): got %d, want %d", i+1, tc.remote, tc.headers, got, tc.want)
		}
	}
}

// TestMiddlewarePerIPAndKey: both limits at once, all or nothing.
func TestMiddlewarePerIPAndKey(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	h := httplimit.Middleware(c, httplimit.Config{
		Limit:       client.Limit{Algorithm: algorithms.SlidingWindow, Requests: 2, Period: time.Minute},
		IPLimit:     client.Limit{Algorithm: algorithms.SlidingWindow, Requests: 3, Period: time.Minute},
		PerIPAndKey: true,
	})(ok)

	// One IP rotating keys: the IP limit stops it at 3.
	for i, key := range []string{"k1", "k2", "k3", "k4"} {
		want := 200
		if i == 3 {
			want = 429
		}
		w := get(h, "192.0.2.1:1", "X-API-Key", key)
		if w.Code != want {
			t.Fatalf("key %s from one IP: got %d, want %d", key, w.Code, want)
		}
		if want == 429 && w.Header().Get("RateLimit") != `"ip";r=0;t=120` {
			t.Fatalf("headers describe the denying IP limit: got %q", w.Header().Get("RateLimit"))
		}
	}
	// k4 was not charged by the denied request: it still has both units,
	// and one key rotating IPs is stopped by its key limit.
	for i, ip := range []string{"192.0.2.2:1", "192.0.2.3:1", "192.0.2.4:1"} {
		want := 200
		if i == 2 {
			want = 429
		}
		w := get(h, ip, "X-API-Key", "k4")
		if w.Code != want {
			t.Fatalf("k4 from %s: got %d, want %d", ip, w.Code, want)
		}
		if i == 0 && (w.Header().Get("RateLimit-Policy") != `"apikey";q=2;w=60` || w.Header().Get("X-RateLimit-Remaining") != "1") {
			t.Fatalf("allowed: headers describe the fuller limit (the key's): got policy %q remaining %q", w.Header().Get("RateLimit-Policy"), w.Header().Get("X-RateLimit-Remaining"))
		}
	}
	// Without a key: the IP limit alone.
	if got := get(h, "192.0.2.9:1").Code; got != 200 {
		t.Fatalf("no key: got %d, want 200", got)
	}
}

// TestMiddlewareFailureModes: unreachable or hanging floodgate; open
// serves without headers, closed answers 503.
func TestMiddlewareFailureModes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		addr    string
		both    bool
		mode    client.FailureMode
		want    int
		wantErr codes.Code
		timeout time.Duration // the middleware's: long enough for a refused dial on a busy machine
	}{
		{"unreachable, open", floodgatetest.DeadAddr(t), false, client.FailOpen, 200, codes.Unavailable, 5 * time.Second},
		{"unreachable, closed", floodgatetest.DeadAddr(t), false, client.FailClosed, 503, codes.Unavailable, 5 * time.Second},
		{"hanging, open", floodgatetest.StartHanging(t), false, client.FailOpen, 200, codes.DeadlineExceeded, 30 * time.Millisecond},
		{"hanging, closed", floodgatetest.StartHanging(t), false, client.FailClosed, 503, codes.DeadlineExceeded, 30 * time.Millisecond},
		{"hanging batch, closed", floodgatetest.StartHanging(t), true, client.FailClosed, 503, codes.DeadlineExceeded, 30 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log floodgatetest.ErrorLog
			h := httplimit.Middleware(floodgatetest.Dial(t, tc.addr, client.WithTimeout(time.Hour)), httplimit.Config{
				Limit:       perMinute3,
				PerIPAndKey: tc.both,
				FailureMode: tc.mode,
				Timeout:     tc.timeout, // overrides the client's hour
				OnError:     func(_ *http.Request, err error) { log.Add(err) },
			})(ok)
			w := get(h, "192.0.2.1:1", "X-API-Key", "k")
			body := "ok"
			headers := map[string]string{}
			if tc.want == 503 {
				body = `{"error":"rate_limiter_unavailable"}` + "\n"
				headers["Retry-After"] = "1"
			}
			wantResponse(t, tc.name, w, tc.want, headers, body)
			if got := log.Codes(); len(got) != 1 || !errCodeOK(got[0], tc.wantErr) {
				t.Fatalf("OnError saw %v, want one %v", got, tc.wantErr)
			}
		})
	}
}

// TestMiddlewareBadLimit: a limit floodgate rejects is a configuration
// error, answered 500 whatever the failure mode, so a typo cannot pass
// silently.
func TestMiddlewareBadLimit(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	var log floodgatetest.ErrorLog
	var logged floodgatetest.LogCounter
	h := httplimit.Middleware(floodgatetest.Dial(t, addr), httplimit.Config{
		Limit:       client.Policy("nope"),
		FailureMode: client.FailClosed,
		OnError:     func(_ *http.Request, err error) { log.Add(err) },
		Logger:      slog.New(&logged),
	})(ok)
	if got := get(h, "192.0.2.1:1").Code; got != 500 {
		t.Fatalf("got %d, want 500", got)
	}
	if got := log.Codes(); len(got) != 1 || got[0] != codes.NotFound {
		t.Fatalf("OnError saw %v, want NotFound", got)
	}
	logged.WantLogged(t, 1, "unknown policy")
}

// errCodeOK reports whether got is the error code a case wants. An
// unreachable floodgate is refused (Unavailable) unless its freed port was
// taken meanwhile by another test's server that never answers, which
// times out instead: both say "floodgate could not decide".
func errCodeOK(got, want codes.Code) bool {
	return got == want || (want == codes.Unavailable && got == codes.DeadlineExceeded)
}
