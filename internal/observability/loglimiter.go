package observability

import (
	"sync"
	"time"
)

// LogLimiter keeps a repeated log line to one per interval, counting the
// lines it held back, so an outage under load writes a line every few
// seconds. The zero value is ready; do not copy it after first use. Safe
// for concurrent use.
type LogLimiter struct {
	mu         sync.Mutex
	last       time.Time // when the last line was admitted; zero: never
	suppressed int64
}

// Allow reports whether a line may be logged at now (the first one always
// may, then one per every) and, when it may, how many lines it held
// back since the last admitted one. A line not admitted is counted.
func (l *LogLimiter) Allow(now time.Time, every time.Duration) (heldBack int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < every {
		l.suppressed++
		return 0, false
	}
	heldBack = l.suppressed
	l.last, l.suppressed = now, 0
	return heldBack, true
}
