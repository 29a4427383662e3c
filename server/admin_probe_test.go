package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/server"
)

// TestAdminProbes: /healthz answers while the process runs; /readyz and
// the reference service's /healthcheck follow Ready alike, so a
// Deployment migrated unchanged keeps its probes.
func TestAdminProbes(t *testing.T) {
	var notReady error
	h := server.NewAdminHandler(server.AdminSettings{Ready: func(context.Context) error { return notReady }})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Body)
		return rec.Code, string(body)
	}
	for _, p := range []string{"/healthz", "/readyz", "/healthcheck"} {
		if code, body := get(p); code != http.StatusOK || body != "ok\n" {
			t.Errorf("ready: GET %s = %d %q, want 200 ok", p, code, body)
		}
	}
	notReady = errors.New("draining")
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("not ready: GET /healthz = %d, want 200 (liveness)", code)
	}
	for _, p := range []string{"/readyz", "/healthcheck"} {
		if code, body := get(p); code != http.StatusServiceUnavailable || !strings.Contains(body, "draining") {
			t.Errorf("not ready: GET %s = %d %q, want 503 naming the reason", p, code, body)
		}
	}
}
