package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a slog handler keeping every record.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
	level   slog.Level
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// TestLogHTTP: each HTTP request is logged at debug level with its method,
// path, status, duration (a string) and remote address, never its
// Authorization header, query or body; without debug logs nothing is
// wrapped.
func TestLogHTTP(t *testing.T) {
	tests := []struct {
		name, method, target string
		status               int
		write                bool
		wantStatus           int64
	}{
		{"ok", "GET", "/healthz", 0, true, 200},
		{"implicit 200 no body", "GET", "/x", 0, false, 200},
		{"teapot", "POST", "/v1/check?token=s3cret", 418, true, 418},
		{"404", "DELETE", "/nope", 404, false, 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{level: slog.LevelDebug}
			now := time.Unix(100, 0)
			clock := func() time.Time { t := now; now = now.Add(1500 * time.Millisecond); return t }
			h := LogHTTP(slog.New(rec), clock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.status != 0 {
					w.WriteHeader(tc.status)
				}
				if tc.write {
					_, _ = w.Write([]byte("body s3cret"))
				}
			}))
			req := httptest.NewRequest(tc.method, tc.target, strings.NewReader("request s3cret"))
			req.Header.Set("Authorization", "Bearer s3cret")
			req.RemoteAddr = "192.0.2.7:4242"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if len(rec.records) != 1 {
				t.Fatalf("%d records, want 1", len(rec.records))
			}
			r := rec.records[0]
			if r.Level != slog.LevelDebug {
				t.Errorf("level %v, want debug", r.Level)
			}
			got := map[string]slog.Value{}
			var all strings.Builder
			all.WriteString(r.Message)
			r.Attrs(func(a slog.Attr) bool {
				got[a.Key] = a.Value
				all.WriteString(" " + a.Key + "=" + a.Value.String())
				return true
			})
			if strings.Contains(all.String(), "s3cret") || strings.Contains(all.String(), "Bearer") {
				t.Errorf("record %q shows a secret", all.String())
			}
			want := map[string]string{"method": tc.method, "path": strings.Split(tc.target, "?")[0], "duration": "1.5s", "remote": "192.0.2.7:4242"}
			for k, v := range want {
				if got[k].Kind() != slog.KindString || got[k].String() != v {
					t.Errorf("%s = %v, want the string %q", k, got[k], v)
				}
			}
			if got["status"].Kind() != slog.KindInt64 || got["status"].Int64() != tc.wantStatus {
				t.Errorf("status = %v, want %d", got["status"], tc.wantStatus)
			}
			if w.Code != int(tc.wantStatus) {
				t.Errorf("client saw %d, want %d", w.Code, tc.wantStatus)
			}
		})
	}
	inner := http.NewServeMux()
	if h := LogHTTP(slog.New(&recorder{level: slog.LevelInfo}), time.Now, inner); h != http.Handler(inner) {
		t.Error("without debug logs the handler is wrapped")
	}
}
