package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// leaky20 is a partner API's 20 requests/s: a slot every 50 ms.
var leaky20 = client.Limit{Algorithm: client.LeakyBucket, Requests: 20, Period: time.Second}

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
		if got := time.Since(start); got < want || got > want+2*time.Second {
			t.Errorf("wait %d took %v, want %v", i, got, want)
		}
	}
	if got := peekWait(t, c, "partner"); got != 200*time.Millisecond {
		t.Errorf("after 4 waits the next slot is in %v, want 200ms", got)
	}
}

// TestWaitDeadlineGivesTheSlotBack: a slot after the context's deadline is
// given back at once, with ErrWaitTooLong and no sleep, as x/time/rate's
// Wait does.
func TestWaitDeadlineGivesTheSlotBack(t *testing.T) {
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
	if got := peekWait(t, c, "partner"); got != 500*time.Millisecond {
		t.Errorf("after the give-back the next slot is in %v, want 500ms (the slot returned)", got)
	}
}

// TestWaitCancelledGivesTheSlotBack: a context cancelled during the sleep
// ends Wait with its error and the slot goes back.
func TestWaitCancelledGivesTheSlotBack(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	for range 10 {
		if _, err := c.Check(context.Background(), client.Request{Key: "partner", Limit: leaky20}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var err error
	wg.Go(func() { err = c.Wait(ctx, "partner", leaky20) })
	time.Sleep(50 * time.Millisecond) // let it take its slot and sleep
	if got := peekWait(t, c, "partner"); got != 550*time.Millisecond {
		t.Fatalf("while Wait sleeps the next slot is in %v, want 550ms", got)
	}
	cancel()
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if got := peekWait(t, c, "partner"); got != 500*time.Millisecond {
		t.Errorf("after the cancel the next slot is in %v, want 500ms (the slot returned)", got)
	}
}

// TestWaitFullQueue: a full queue answers RetryAfter; Wait sleeps that
// long and checks again, and gives up at once when the deadline comes
// first.
func TestWaitFullQueue(t *testing.T) {
	addr, clock := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	small := leaky20
	small.Burst = 2
	for range 2 {
		if _, err := c.Check(context.Background(), client.Request{Key: "partner", Limit: small}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Wait(ctx, "partner", small); !errors.Is(err, client.ErrWaitTooLong) {
		t.Fatalf("full queue, 20ms deadline: Wait = %v, want ErrWaitTooLong", err)
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
// and a give-back on the deadline returns all n.
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
	if got := peekWait(t, c, "batch"); got != 150*time.Millisecond {
		t.Errorf("after the give-back the next slot is in %v, want 150ms again", got)
	}
	if err := c.WaitN(ctx, "batch", leaky20, 0); err == nil {
		t.Error("WaitN(0) was accepted")
	}
	if err := c.WaitN(ctx, "batch", leaky20, 21); err == nil {
		t.Error("WaitN above the queue's size was accepted")
	}
}
