package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrWaitTooLong is wrapped by Wait's error when the slot (or the retry
// of a full queue) would come after the context's deadline; the slot then
// passes unused.
var ErrWaitTooLong = errors.New("the wait would outlast the context's deadline")

// ErrNeverAdmitted is wrapped by Wait's error when the limit can never
// admit the request (floodgate's RetryAfter is negative): its cost is
// above the capacity that decides. (A cost above a replica's local share,
// failure_mode: local, is answered with the wait until the limit's period
// ends instead: the limit admits it once the store decides again.)
var ErrNeverAdmitted = errors.New("the limit can never admit this request")

// zeroRetryAfter is how long Wait sleeps after a deny that says no wait
// (retry_after 0, which floodgate never sends with a deny): a second, as
// a Retry-After header is at least 1, so that no Wait asks in a loop.
const zeroRetryAfter = time.Second

// Wait takes one slot of key's limit, usually of an algorithm that
// admits with a wait (Decision.Wait), and blocks until the slot starts, like
// golang.org/x/time/rate's Limiter.Wait: a partner API that allows 10
// requests/s gets one call every 100 ms from all its callers together,
// instead of denials to retry.
//
// It checks once; floodgate answers with the slot's Wait, and Wait sleeps
// that long. If the slot would start after ctx's deadline it returns an
// error wrapping ErrWaitTooLong at once, without sleeping; if ctx ends
// while it sleeps, it returns ctx's error. Either way the slot stays
// taken and passes unused: a give-back (a check of negative cost) could
// only free the queue's last slot, which may be another caller's, whose
// start the next caller would then share. A full queue is a deny with
// RetryAfter: Wait sleeps that long (at least a second when RetryAfter is
// 0) and checks again, or returns ErrWaitTooLong if the deadline comes
// first, or ErrNeverAdmitted for a negative RetryAfter (a cost no wait
// lets through). With the other algorithms Wait waits for RetryAfter the same
// way, so it works with any limit; only an algorithm that waits spaces
// the starts exactly.
//
// A degraded answer (Decision.Degraded) that allows returns nil at once:
// the failure mode said open. Errors from Check are returned as they are.
func (c *Client) Wait(ctx context.Context, key string, limit Limit) error {
	return c.WaitN(ctx, key, limit, 1)
}

// WaitN is Wait for n slots at once (a batch of n calls to the partner
// API, or one call that costs n): it blocks until the first of them
// starts; the next caller's slot comes n slots later. n must be at least 1; more than the limit's capacity (the
// burst, the queue's size) is refused by floodgate
// (InvalidArgument), since it could never be admitted.
func (c *Client) WaitN(ctx context.Context, key string, limit Limit, n int64) error {
	if n < 1 {
		return fmt.Errorf("floodgate wait: n must be at least 1, got %d", n)
	}
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("floodgate wait: %w", err)
		}
		d, err := c.Check(ctx, Request{Key: key, Limit: limit, Cost: n})
		if err != nil {
			// A caller that cancels while the check is in flight gets its
			// context's error, as from the sleep, not gRPC's status.
			if cerr := ctx.Err(); cerr != nil {
				return fmt.Errorf("floodgate wait: %w", cerr)
			}
			return err
		}
		// Allowed: sleep until the slot starts. Denied (a full queue):
		// sleep for RetryAfter, then check again.
		wait, what := d.Wait, "the slot starts in"
		if !d.Allowed {
			wait, what = d.RetryAfter, "the queue is full for"
			switch {
			case wait < 0:
				return fmt.Errorf("floodgate wait: %w", ErrNeverAdmitted)
			case wait == 0:
				wait = zeroRetryAfter
			}
		} else if wait <= 0 {
			return nil
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return fmt.Errorf("floodgate wait: %s %v: %w", what, wait, ErrWaitTooLong)
		}
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("floodgate wait: %w", err)
		}
		if d.Allowed {
			return nil
		}
	}
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
