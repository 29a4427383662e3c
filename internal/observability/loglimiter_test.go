package observability

import (
	"sync"
	"testing"
	"time"
)

func TestLogLimiter(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	var l LogLimiter
	steps := []struct {
		at       time.Duration
		ok       bool
		heldBack int64
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{9999 * time.Millisecond, false, 0},
		{10 * time.Second, true, 2}, // exactly one interval later
		{15 * time.Second, false, 0},
		{time.Minute, true, 1},
		{time.Minute, false, 0},      // the same instant again
		{30 * time.Second, false, 0}, // a clock that went back is held back
	}
	for i, s := range steps {
		n, ok := l.Allow(t0.Add(s.at), 10*time.Second)
		if ok != s.ok || n != s.heldBack {
			t.Fatalf("step %d at %v: Allow = (%d, %v), want (%d, %v)", i, s.at, n, ok, s.heldBack, s.ok)
		}
	}
}

// TestLogLimiterConcurrent: of many concurrent lines at one instant exactly one
// is admitted, and the next interval's line counts every other.
func TestLogLimiterConcurrent(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	var l LogLimiter
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := l.Allow(t0, time.Minute); ok {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != 1 {
		t.Fatalf("%d lines admitted at one instant, want 1", admitted)
	}
	if n, ok := l.Allow(t0.Add(time.Minute), time.Minute); !ok || n != 63 {
		t.Fatalf("next interval: Allow = (%d, %v), want (63, true)", n, ok)
	}
}
