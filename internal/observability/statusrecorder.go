package observability

import (
	"cmp"
	"net/http"
)

// StatusRecorder is an http.ResponseWriter that remembers the first status
// written. Unwrap lets http.ResponseController reach the writer underneath.
type StatusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records code, then writes it.
func (w *StatusRecorder) WriteHeader(code int) {
	w.status = cmp.Or(w.status, code)
	w.ResponseWriter.WriteHeader(code)
}

// Write records 200 if no status was written, then writes b.
func (w *StatusRecorder) Write(b []byte) (int, error) {
	w.status = cmp.Or(w.status, http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Unwrap is the ResponseWriter underneath.
func (w *StatusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Code is the status written, 200 if the handler wrote nothing.
func (w *StatusRecorder) Code() int { return cmp.Or(w.status, http.StatusOK) }
