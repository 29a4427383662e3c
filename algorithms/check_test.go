package algorithms_test

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// checkDecision returns what is wrong with d, a decision for cost under l,
// judged by the rules every decision obeys whatever the state.
func checkDecision(l algorithms.Limit, cost int64, d algorithms.Decision) error {
	c := l.Capacity()
	// Twice MaxWait: the longest wait plus a clock that went back by as much.
	const longest = 2 * algorithms.MaxWait
	switch {
	case d.Limit != c:
		return fmt.Errorf("Limit %d, want the capacity %d", d.Limit, c)
	case d.Remaining < 0 || d.Remaining > c:
		return fmt.Errorf("Remaining %d outside [0, %d]", d.Remaining, c)
	case d.Allowed && d.RetryAfter != 0:
		return fmt.Errorf("allowed with RetryAfter %v", d.RetryAfter)
	case !d.Allowed && cost <= 0:
		return fmt.Errorf("denied a cost of %d", cost)
	case !d.Allowed && cost > c && d.RetryAfter != algorithms.Never:
		return fmt.Errorf("cost %d above the capacity %d: RetryAfter %v, want Never", cost, c, d.RetryAfter)
	case !d.Allowed && cost <= c && (d.RetryAfter <= 0 || d.RetryAfter > longest):
		return fmt.Errorf("denied cost %d with RetryAfter %v, want within (0, %v]", cost, d.RetryAfter, longest)
	case (d.RetryAfter != algorithms.Never && d.RetryAfter%time.Millisecond != 0) || d.ResetAfter%time.Millisecond != 0 || d.TTL%time.Millisecond != 0:
		return fmt.Errorf("durations not whole milliseconds: %+v", d)
	case d.ResetAfter < 0 || d.ResetAfter > longest:
		return fmt.Errorf("ResetAfter %v outside [0, %v]", d.ResetAfter, longest)
	case d.TTL < d.ResetAfter || d.TTL > longest:
		return fmt.Errorf("TTL %v outside [ResetAfter %v, %v]", d.TTL, d.ResetAfter, longest)
	case d.Remaining == c && d.ResetAfter != 0:
		return fmt.Errorf("Remaining is the capacity %d but ResetAfter is %v", c, d.ResetAfter)
	}
	return nil
}
