package observability

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// storeFailureLogInterval is the least time between two WARN lines of
// failed decisions, and between two "store deciding again" lines.
const storeFailureLogInterval = 10 * time.Second

// FailureLog logs the store's failed decisions without a line per
// decision (the metrics count every one): the first failure at once, then
// at most one WARN summary per storeFailureLogInterval, and the first
// success after failures at INFO. Safe for concurrent use.
type FailureLog struct {
	log *slog.Logger
	api string

	failing atomic.Bool // a failure since the last success

	mu       sync.Mutex
	warn     LogLimiter // the WARN lines
	info     LogLimiter // the recovery lines
	since    time.Time  // when the current failures began
	unlogged int64      // failures not yet in a line
	total    int64      // failures since the current failures began
}

// NewFailureLog is a FailureLog for the decisions of api (a metrics API
// label such as APICheck), logging to log.
func NewFailureLog(log *slog.Logger, api string) *FailureLog {
	return &FailureLog{log: log, api: api}
}

// Failed records a decision the store could not make at now.
func (f *FailureLog) Failed(ctx context.Context, now time.Time, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unlogged++
	f.total++
	if !f.failing.Load() {
		f.failing.Store(true)
		f.since, f.total = now, 1
		if _, ok := f.warn.Allow(now, storeFailureLogInterval); ok {
			f.log.WarnContext(ctx, "store could not decide; answering by failure modes until it does",
				"api", f.api, "failed", f.unlogged, "err", err)
			f.unlogged = 0
		}
		return
	}
	if _, ok := f.warn.Allow(now, storeFailureLogInterval); ok {
		f.log.WarnContext(ctx, "store still failing; answering by failure modes",
			"api", f.api, "failed", f.unlogged, "since", f.since, "err", err)
		f.unlogged = 0
	}
}

// OK records a decision the store made at now.
func (f *FailureLog) OK(ctx context.Context, now time.Time) {
	if !f.failing.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failing.Load() {
		return
	}
	f.failing.Store(false)
	if _, ok := f.info.Allow(now, storeFailureLogInterval); ok {
		f.log.InfoContext(ctx, "store deciding again",
			"api", f.api, "failed", f.total, "for", now.Sub(f.since))
		f.unlogged = 0
	}
}
