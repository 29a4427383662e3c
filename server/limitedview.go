package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/floodgate/floodgate/internal/limited"
)

// This file serves GET /debug/limited: the heaviest denied keys of each
// rule (see package limited) as JSON.

// debugLimited serves GET /debug/limited from t at clock's time
// (NewAdminHandler puts it behind adminOnly). Query parameters: rule,
// domain, k, by (denied or cost), window (1m or 15m); a bad one answers
// 400 naming it. Without a tracker it answers 404.
func debugLimited(t *limited.Tracker, clock func() time.Time) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if t == nil {
			http.Error(w, "heavy-hitter tracking is off (--limited-keys 0)", http.StatusNotFound)
			return
		}
		q, err := limitedQuery(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, t.Report(clock(), q))
	}
}

// limitedQuery reads a limited.Query from r's query parameters.
func limitedQuery(r *http.Request) (limited.Query, error) {
	v := r.URL.Query()
	q := limited.Query{Rule: v.Get("rule"), Domain: v.Get("domain"), By: v.Get("by"), Window: v.Get("window")}
	if s := v.Get("k"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil {
			return q, errors.New("k: want a whole number of keys, got " + strconv.Quote(s))
		}
		q.K = k
	}
	if err := q.Validate(); err != nil {
		return q, err
	}
	return q, nil
}

// writeJSON answers v as indented JSON, not to be cached.
func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	_, _ = w.Write(append(body, '\n'))
}
