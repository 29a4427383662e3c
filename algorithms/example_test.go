package algorithms_test

import (
	"fmt"
	"sync"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// limiter is a whole in-process rate limiter on this package alone: a State
// per key behind one lock, the clock read by the caller.
type limiter struct {
	mu     sync.Mutex
	limit  algorithms.Limit
	states map[string]algorithms.State
}

func (l *limiter) allow(key string, now time.Time) algorithms.Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	next, d := algorithms.Decide(l.limit, l.states[key], now, 1)
	if d.Allowed {
		l.states[key] = next
	}
	return d
}

// Example embeds the algorithms in a Go service: 3 requests a second per
// key with a token bucket, decided in process.
func Example() {
	lim := &limiter{
		limit:  algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 3, Period: time.Second},
		states: map[string]algorithms.State{},
	}
	if err := lim.limit.Validate(); err != nil {
		panic(err)
	}
	now := time.UnixMilli(1_700_000_000_000)
	for i := range 4 {
		d := lim.allow("alice", now)
		fmt.Printf("request %d: allowed=%v remaining=%d retry_after=%v\n", i+1, d.Allowed, d.Remaining, d.RetryAfter)
	}
	d := lim.allow("alice", now.Add(334*time.Millisecond))
	fmt.Printf("334ms later: allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	// Output:
	// request 1: allowed=true remaining=2 retry_after=0s
	// request 2: allowed=true remaining=1 retry_after=0s
	// request 3: allowed=true remaining=0 retry_after=0s
	// request 4: allowed=false remaining=0 retry_after=334ms
	// 334ms later: allowed=true remaining=0
}
