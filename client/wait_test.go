package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// leaky20 is a partner API's 20 requests/s: a slot every 50 ms.
var leaky20 = client.Limit{Algorithm: algorithms.LeakyBucket, Requests: 20, Period: time.Second}

// peekWait is the wait a check of key would get now.
func peekWait(t *testing.T, c *client.Client, key string) time.Duration {
	t.Helper()
	d, err := c.Peek(context.Background(), client.Request{Key: key, Limit: leaky20})
	if err != nil {
		t.Fatal(err)
	}
	return d.Wait
}

// TestWaitSleepsForTheSlot: against a real floodgate whose clock stands
// still, each Wait takes the next 50 ms slot and sleeps until it starts.
func TestWaitSleepsForTheSlot(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	ctx := context.Background()
	for i := range 4 {
		start := time.Now()
		if err := c.Wait(ctx, "partner", leaky20); err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
		// The server's clock is frozen: slot i starts i × 50 ms after it.
		want := time.Duration(i) * 50 * time.Millisecond
		// The upper bound only catches a Wait that sleeps far past its
		// slot; a busy machine may add seconds of its own.
		if got := time.Since(start); got < want || got > want+10*time.Second {
			t.Errorf("wait %d took %v, want %v", i, got, want)
		}
	}
	if got := peekWait(t, c, "partner"); got != 200*time.Millisecond {
		t.Errorf("after 4 waits the next slot is in %v, want 200ms", got)
	}
}

// TestWaitDeadlineKeepsTheSpacing: a slot after the context's deadline
// ends Wait at once, with ErrWaitTooLong and no sleep, as x/time/rate's
// Wait does. The slot passes unused: giving it back would free the
// queue's last slot, which may be another caller's.
func TestWaitDeadlineKeepsTheSpacing(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	for range 10 {
		if _, err := c.Check(context.Background(), client.Request{Key: "partner", Limit: leaky20}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Wait(ctx, "partner", leaky20) // its slot is 500 ms away
	if !errors.Is(err, client.ErrWaitTooLong) {
		t.Fatalf("Wait = %v, want ErrWaitTooLong", err)
	}
	if took := time.Since(start); took > 250*time.Millisecond {
		t.Errorf("Wait took %v to give up; it must not sleep", took)
	}
	if got := peekWait(t, c, "partner"); got != 550*time.Millisecond {
		t.Errorf("after the deadline the next slot is in %v, want 550ms", got)
	}
}

// TestWaitCancelledNeverSharesAStart: callers take the slots 0, 50, 100
// and 150 ms; the one sleeping for 100 ms is cancelled. The next caller
// must start at 200 ms, after everyone's slot: freeing the queue's last
// slot for the cancelled middle one would give it 150 ms, the same start
// as the last holder.
func TestWaitCancelledNeverSharesAStart(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	check := func() time.Duration {
		t.Helper()
		d, err := c.Check(context.Background(), client.Request{Key: "partner", Limit: leaky20})
		if err != nil || !d.Allowed {
			t.Fatalf("check: %+v %v", d, err)
		}
		return d.Wait
	}
	check()
	check()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var err error
	wg.Go(func() { err = c.Wait(ctx, "partner", leaky20) })
	for peekWait(t, c, "partner") != 150*time.Millisecond {
		time.Sleep(time.Millisecond) // until Wait holds the 100 ms slot
	}
	last := check() // 150 ms
	cancel()
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if next := check(); next <= last {
		t.Errorf("the next caller starts at %v, the last holder at %v: two starts at once", next, last)
	}
}

// TestWaitFullQueue: a full queue answers RetryAfter; Wait sleeps that
// long and checks again, and gives up at once when the deadline comes
// first.
func TestWaitFullQueue(t *testing.T) {
	addr, clock := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	// A full queue of one slot every 10 s frees a place in 10 s of the
	// server's (frozen) clock, far past a deadline a busy machine still
	// meets.
	slow := client.Limit{Algorithm: algorithms.LeakyBucket, Requests: 1, Period: 10 * time.Second, Burst: 2}
	small := leaky20
	small.Burst = 2
	for range 2 {
		for _, l := range []client.Limit{slow, small} {
			if _, err := c.Check(context.Background(), client.Request{Key: "partner", Limit: l}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Wait(ctx, "partner", slow); !errors.Is(err, client.ErrWaitTooLong) {
		t.Fatalf("full queue, 2s deadline: Wait = %v, want ErrWaitTooLong", err)
	}
	// The server's clock moves on while Wait sleeps the RetryAfter.
	done := make(chan error, 1)
	go func() { done <- c.Wait(context.Background(), "partner", small) }()
	time.Sleep(20 * time.Millisecond)
	clock.Advance(50 * time.Millisecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait after a place freed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after a place freed")
	}
}

// TestWaitN: n slots at once; the next caller's slot comes n slots later,
// also after a WaitN that gave up on its deadline.
func TestWaitN(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	ctx := context.Background()
	if err := c.WaitN(ctx, "batch", leaky20, 3); err != nil {
		t.Fatal(err)
	}
	if got := peekWait(t, c, "batch"); got != 150*time.Millisecond {
		t.Fatalf("after WaitN(3) the next slot is in %v, want 150ms", got)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := c.WaitN(short, "batch", leaky20, 4); !errors.Is(err, client.ErrWaitTooLong) {
		t.Fatalf("WaitN(4) past the deadline: %v, want ErrWaitTooLong", err)
	}
	if got := peekWait(t, c, "batch"); got != 350*time.Millisecond {
		t.Errorf("after WaitN(4) gave up the next slot is in %v, want 350ms (its slots pass unused)", got)
	}
	if err := c.WaitN(ctx, "batch", leaky20, 0); err == nil {
		t.Error("WaitN(0) was accepted")
	}
	if err := c.WaitN(ctx, "batch", leaky20, 21); err == nil {
		t.Error("WaitN above the queue's size was accepted")
	}
}
