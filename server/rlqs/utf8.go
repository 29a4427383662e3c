package rlqs

import (
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/floodgate/floodgate/internal/observability"
)

// A bucket id's keys and values are proto3 strings, which must be UTF-8:
// a strict parser refuses a whole response holding one that is not. Envoy
// copies header bytes into bucket ids, so such a bucket is decoded
// (lenientcodec) but dropped, logged and counted, never echoed.

// refusedLogEvery is the least time between two logs of dropped bucket
// ids; the drops between are counted in the next line.
const refusedLogEvery = 10 * time.Second

// validID reports whether every key and value of b is UTF-8.
func validID(b map[string]string) bool {
	for k, v := range b {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

// refusedLog logs dropped bucket ids at most every refusedLogEvery.
type refusedLog struct {
	every observability.LogLimiter
}

// refused records one dropped bucket id of a stream of domain at now.
func (r *refusedLog) refused(log *slog.Logger, now time.Time, domain string, field string) {
	if n, ok := r.every.Allow(now, refusedLogEvery); ok {
		log.Warn("quota: a bucket id that is not UTF-8 was dropped: no assignment is sent for it (an answer holding it would be refused whole by a strict proto3 parser); the stream's other buckets go on",
			"domain", trim(domain), "field", field, "dropped_since_last_log", n)
	}
}
