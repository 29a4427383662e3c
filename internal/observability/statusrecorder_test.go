package observability

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestStatusRecorder(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    func(w http.ResponseWriter)
		want int
	}{
		{"nothing written", func(http.ResponseWriter) {}, http.StatusOK},
		{"a body only", func(w http.ResponseWriter) { _, _ = w.Write([]byte("x")) }, http.StatusOK},
		{"a status", func(w http.ResponseWriter) { w.WriteHeader(http.StatusTooManyRequests) }, http.StatusTooManyRequests},
		{"the first status wins", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusForbidden)
			w.WriteHeader(http.StatusOK)
		}, http.StatusForbidden},
		{"a body, then a status", func(w http.ResponseWriter) {
			_, _ = w.Write([]byte("x"))
			w.WriteHeader(http.StatusTeapot)
		}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := httptest.NewRecorder()
			rec := &StatusRecorder{ResponseWriter: inner}
			tc.h(rec)
			if got := rec.Code(); got != tc.want {
				t.Errorf("Code() = %d, want %d", got, tc.want)
			}
			if rec.Unwrap() != inner {
				t.Error("Unwrap is not the writer underneath")
			}
		})
	}
}
