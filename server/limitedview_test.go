package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/limited"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/adminui"
)

func httpGet(t *testing.T, url string, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestDebugLimited: the report as JSON, its query parameters, and keys
// that are not UTF-8 or carry markup shown escaped or as plain text.
func TestDebugLimited(t *testing.T) {
	now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := limited.New(limited.Config{})
	l := &rules.Limit{Name: "per_ip", ID: "shop|ip|0", Domain: "shop"}
	for i, v := range []string{"10.0.0.1", "bad\xff\xfeutf8", `<img src=x onerror=alert(1)>`} {
		for range 3 + i {
			tr.ObserveEnvoy(now, l, []rules.Entry{{Key: "ip", Value: v}}, 2, false)
		}
	}
	tr.ObserveCheck(now, "login", false, l.Rate, "bob", 1, false)
	srv := httptest.NewServer(server.NewAdminHandler(server.AdminSettings{Limited: tr, Clock: func() time.Time { return now }}))
	defer srv.Close()

	code, h, body := httpGet(t, srv.URL+"/debug/limited?domain=shop&k=2", nil)
	if code != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s: %s", code, h.Get("Content-Type"), body)
	}
	var r limited.Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Rules) != 1 || r.Rules[0].Rule != "per_ip" || len(r.Rules[0].Keys) != 2 {
		t.Fatalf("report %+v, want per_ip with 2 keys", r)
	}
	keys := r.Rules[0].Keys
	if keys[0].Key != `ip=<img src=x onerror=alert(1)>` || keys[0].Denied.Total != 5 || keys[0].DeniedCost.Total != 10 {
		t.Errorf("top key %+v", keys[0])
	}
	if keys[1].Key != `ip=bad\xff\xfeutf8` {
		t.Errorf("second key %q, want the bytes escaped", keys[1].Key)
	}
	if !strings.Contains(body, `"first_seen"`) || !strings.Contains(body, `"last_seen"`) || !strings.Contains(body, `"allowed"`) {
		t.Errorf("body lacks first_seen, last_seen or allowed: %s", body)
	}
	for _, bad := range []string{"?k=x", "?k=-1", "?by=keys", "?window=2h"} {
		code, _, body := httpGet(t, srv.URL+"/debug/limited"+bad, nil)
		if code != 400 {
			t.Errorf("%s: %d %s, want 400", bad, code, body)
		}
	}
	off := httptest.NewServer(server.NewAdminHandler(server.AdminSettings{}))
	defer off.Close()
	if code, _, _ := httpGet(t, off.URL+"/debug/limited", nil); code != 404 {
		t.Errorf("without a tracker: %d, want 404", code)
	}
}

// TestAdminViewsBehindAdminToken: with tokens on, the page, its assets,
// /debug/limited and /debug/explain refuse a caller without an admin
// token (bearer, or basic auth with the token as password, as a browser
// sends it), and serve one with it.
func TestAdminViewsBehindAdminToken(t *testing.T) {
	tokPath := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokPath, []byte("admintoken admin\nusertoken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokenAuth(t.Context(), tokPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close() })
	explain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) })
	srv := httptest.NewServer(server.NewAdminHandler(server.AdminSettings{AdminAuth: tokens, Limited: limited.New(limited.Config{}), Explain: explain}))
	defer srv.Close()
	basic := func(user, pass string) http.Header {
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.SetBasicAuth(user, pass)
		return req.Header
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	for _, path := range []string{"/", "/ui/app.js", "/ui/app.css", "/debug/limited", "/debug/explain?domain=d&descriptor=k=v", "/debug/config"} {
		for _, tc := range []struct {
			name   string
			header http.Header
			want   int
		}{
			{"none", nil, 401},
			{"unknown bearer", bearer("nope"), 401},
			{"unknown basic", basic("admin", "nope"), 401},
			{"user bearer", bearer("usertoken"), 403},
			{"user basic", basic("x", "usertoken"), 403},
			{"admin bearer", bearer("admintoken"), 200},
			{"admin basic", basic("anyone", "admintoken"), 200},
		} {
			code, h, _ := httpGet(t, srv.URL+path, tc.header)
			if code != tc.want {
				t.Errorf("%s with %s: %d, want %d", path, tc.name, code, tc.want)
			}
			if code == 401 && !strings.Contains(strings.Join(h.Values("WWW-Authenticate"), " "), "Basic") {
				t.Errorf("%s with %s: 401 without a Basic challenge (a browser would not ask): %q", path, tc.name, h.Values("WWW-Authenticate"))
			}
		}
	}
}

// TestAdminPageHeaders: the page and its assets carry the strict
// Content-Security-Policy, and the page loads its script and style from
// files (no inline script or style for the policy to refuse).
func TestAdminPageHeaders(t *testing.T) {
	srv := httptest.NewServer(server.NewAdminHandler(server.AdminSettings{}))
	defer srv.Close()
	for path, ctype := range map[string]string{"/": "text/html", "/ui/app.js": "text/javascript", "/ui/app.css": "text/css"} {
		code, h, body := httpGet(t, srv.URL+path, nil)
		if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), ctype) {
			t.Errorf("%s: %d %q", path, code, h.Get("Content-Type"))
		}
		if h.Get("Content-Security-Policy") != adminui.ContentSecurityPolicy || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, h)
		}
		if path == "/" && regexp.MustCompile(`<script>|<style|\sstyle=|\son[a-z]+=`).MatchString(body) {
			t.Errorf("the page has inline script or style")
		}
		if path == "/ui/app.js" && regexp.MustCompile(`\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|eval\(`).MatchString(body) {
			t.Errorf("app.js writes HTML from strings")
		}
	}
	for _, directive := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(adminui.ContentSecurityPolicy, directive) {
			t.Errorf("policy lacks %q", directive)
		}
	}
	if strings.Contains(adminui.ContentSecurityPolicy, "unsafe") {
		t.Errorf("policy allows unsafe sources: %s", adminui.ContentSecurityPolicy)
	}
	if code, _, _ := httpGet(t, srv.URL+"/nothing-here", nil); code != 404 {
		t.Errorf("/nothing-here: %d, want 404", code)
	}
}
