package rlqs

import (
	"log/slog"
	"time"

	"github.com/floodgate/floodgate/internal/observability"
)

// failureLogEvery is the least time between two logs of demand store
// failures; the failures between are counted in the next line.
const failureLogEvery = 10 * time.Second

// failureLog logs demand store failures at most every failureLogEvery, so
// an outage under load is a line every few seconds, not one per report.
type failureLog struct {
	every observability.LogLimiter
}

// failed records one failure at now, logging it unless one was logged
// less than failureLogEvery ago.
func (f *failureLog) failed(log *slog.Logger, now time.Time, err error) {
	if n, ok := f.every.Allow(now, failureLogEvery); ok {
		log.Warn("quota: demand not aggregated across replicas; shares come from the last totals or this replica's view",
			"err", err, "failures_since_last_log", n)
	}
}
