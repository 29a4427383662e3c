package rlqs

import (
	"log/slog"
	"sync"
	"time"
)

// failureLogEvery is the least time between two logs of demand store
// failures; the failures between are counted in the next line.
const failureLogEvery = 10 * time.Second

// failureLog logs demand store failures at most every failureLogEvery, so
// an outage under load is a line every few seconds, not one per report.
type failureLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// failed records one failure at now, logging it unless one was logged
// less than failureLogEvery ago.
func (f *failureLog) failed(log *slog.Logger, now time.Time, err error) {
	f.mu.Lock()
	if !f.last.IsZero() && now.Sub(f.last) < failureLogEvery {
		f.suppressed++
		f.mu.Unlock()
		return
	}
	n := f.suppressed
	f.last, f.suppressed = now, 0
	f.mu.Unlock()
	log.Warn("quota: demand not aggregated across replicas; shares come from the last totals or this replica's view",
		"err", err, "failures_since_last_log", n)
}
