package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/floodgate/floodgate/server"
)

// TestAdminLogsHTTPAtDebug: with debug logs on, serve's HTTP port logs
// each request (method, path, status) through the settings' logger,
// without the Authorization header; at info it logs none.
func TestAdminLogsHTTPAtDebug(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelDebug, true}, {slog.LevelInfo, false}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			f, st := adminTestStore(t)
			var out bytes.Buffer
			log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: tc.level}))
			reg, metrics := newMetrics()
			var draining atomic.Bool
			admin, err := serveEnv{f: &f, reg: reg, metrics: metrics}.buildAdmin(st, decisionAPIs{settings: server.Settings{Logger: log}}, grpcPipeline{}, &draining)
			if err != nil {
				t.Fatal(err)
			}
			admin.lis.Close()
			req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
			req.Header.Set("Authorization", "Bearer s3cret")
			admin.srv.Handler.ServeHTTP(httptest.NewRecorder(), req)
			got := out.String()
			logged := strings.Contains(got, "method=GET") && strings.Contains(got, "path=/healthz") && strings.Contains(got, "status=200")
			if logged != tc.want || strings.Contains(got, "s3cret") {
				t.Errorf("log %q, want the request logged=%v and no token", got, tc.want)
			}
		})
	}
}
