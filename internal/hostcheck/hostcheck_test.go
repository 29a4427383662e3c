package hostcheck

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		host  string
		names []string
		want  bool
	}{
		{"", nil, true},
		{"127.0.0.1:8080", nil, true},
		{"127.0.0.1", nil, true},
		{"[::1]:8080", nil, true},
		{"10.1.2.3:8080", nil, true},
		{"localhost:8080", nil, true},
		{"LocalHost.:8080", nil, true},
		{"app.localhost", nil, true},
		{"rebind.attacker.example:8080", nil, false},
		{"localhost.attacker.example", nil, false},
		{"127.0.0.1.nip.io:8080", nil, false},
		{"ratelimit:8080", nil, false},
		{"ratelimit:8080", []string{"ratelimit"}, true},
		{"RateLimit.svc.:8080", []string{" ratelimit.svc "}, true},
		{"ratelimit.svc:8080", []string{"ratelimit"}, false},
		{"anything.example", []string{"*"}, true},
	} {
		if got := Allowed(tc.host, tc.names); got != tc.want {
			t.Errorf("Allowed(%q, %q) = %v, want %v", tc.host, tc.names, got, tc.want)
		}
	}
}

func TestGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	open := func(r *http.Request) bool { return r.URL.Path == "/open" }
	h := Guard(ok, []string{"allowed.example"}, open, "--http-allowed-hosts")
	for _, tc := range []struct {
		host, path string
		want       int
	}{
		{"evil.example", "/v1/reset", http.StatusForbidden},
		{"evil.example", "/open", http.StatusNoContent},
		{"127.0.0.1:1", "/v1/reset", http.StatusNoContent},
		{"allowed.example", "/v1/reset", http.StatusNoContent},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://x"+tc.path, nil)
		r.Host = tc.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s %s: %d, want %d (%s)", tc.host, tc.path, w.Code, tc.want, w.Body)
		}
	}
}
