package breaker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/breaker"
	"github.com/floodgate/floodgate/store/memstore"
)

// transitions records what OnChange heard, for tests that wait on it.
type transitions struct {
	mu    sync.Mutex
	got   []bool
	heard chan struct{} // a send per call
}

func newTransitions() *transitions { return &transitions{heard: make(chan struct{}, 64)} }

func (tr *transitions) add(open bool) {
	tr.mu.Lock()
	tr.got = append(tr.got, open)
	tr.mu.Unlock()
	tr.heard <- struct{}{}
}

// wait returns the first n transitions heard, failing the test if they do
// not come within a few seconds.
func (tr *transitions) wait(t *testing.T, n int) []bool {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		tr.mu.Lock()
		got := append([]bool(nil), tr.got...)
		tr.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-tr.heard:
		case <-deadline:
			t.Fatalf("OnChange heard %v, want %d transitions", got, n)
		}
	}
}

// within runs f and fails the test if it has not returned after a few
// seconds (a call stuck behind OnChange, or a deadlock).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

// waitOpen waits until b.Open() is want.
func waitOpen(t *testing.T, b *breaker.Breaker, want bool) {
	t.Helper()
	for start := time.Now(); b.Open() != want; time.Sleep(time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("Open() still %v after 5s", !want)
		}
	}
}

// closeWithin closes b at cleanup, failing instead of hanging the suite if
// Close blocks.
func closeWithin(t *testing.T, b *breaker.Breaker) {
	t.Cleanup(func() { within(t, "Close", func() { b.Close() }) })
}

// TestBreakerSlowOnChange: an OnChange stuck on the first transition
// holds up neither the call that tripped the circuit nor the probe, and
// once it returns, OnChange hears every transition, in order, ending at
// the circuit's state. When the breaker called OnChange with its mutex
// held, the tripping call waited for OnChange, the probe could not start,
// and a fast trip, recovery and trip could reach OnChange out of order.
func TestBreakerSlowOnChange(t *testing.T) {
	f := &flaky{Store: memstore.New(memstore.Config{})}
	tr := newTransitions()
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	b := breaker.New(f, breaker.Config{Threshold: 1, ProbeInterval: time.Millisecond, CheckInterval: -1,
		OnChange: func(open bool, _ error) {
			<-release
			tr.add(open)
		}})
	closeWithin(t, b)
	t.Cleanup(unblock) // cleanups run last first: OnChange returns, then Close
	out := make([]algorithms.Decision, 1)

	f.down.Store(true)
	within(t, "the Decide that trips the circuit", func() { _ = b.Decide(context.Background(), t0, req(), out) })
	waitOpen(t, b, true)
	f.down.Store(false)
	waitOpen(t, b, false) // the probe closed it, OnChange still stuck
	f.down.Store(true)
	within(t, "the Decide that trips the circuit again", func() { _ = b.Decide(context.Background(), t0, req(), out) })
	waitOpen(t, b, true)

	unblock()
	got := tr.wait(t, 3)
	if want := []bool{true, false, true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("OnChange heard %v, want %v", got, want)
	}
	if last := got[len(got)-1]; last != b.Open() {
		t.Fatalf("OnChange last heard open=%v, but the circuit is open=%v", last, b.Open())
	}
}

// TestBreakerOnChangeReenters: an OnChange that calls Decide, and so
// trips the circuit again, neither deadlocks nor loses the transition it
// caused: it hears it after it returns. When OnChange ran under the
// breaker's mutex, the trip inside it waited for that mutex forever.
func TestBreakerOnChangeReenters(t *testing.T) {
	f := &flaky{Store: memstore.New(memstore.Config{})}
	tr := newTransitions()
	var b *breaker.Breaker
	reentered := false // only OnChange's goroutine touches it
	b = breaker.New(f, breaker.Config{Threshold: 1, ProbeInterval: time.Millisecond, CheckInterval: -1,
		OnChange: func(open bool, _ error) {
			if !open && !reentered {
				// The store fails again at once: this call trips the circuit.
				reentered = true
				f.down.Store(true)
				_ = b.Decide(context.Background(), t0, req(), make([]algorithms.Decision, 1))
			}
			tr.add(open)
		}})
	closeWithin(t, b)

	f.down.Store(true)
	_ = b.Decide(context.Background(), t0, req(), make([]algorithms.Decision, 1))
	if got := tr.wait(t, 1); !got[0] {
		t.Fatalf("OnChange heard %v, want [true]", got)
	}
	f.down.Store(false) // the probe closes the circuit
	got := tr.wait(t, 3)
	if want := []bool{true, false, true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("OnChange heard %v, want %v", got, want)
	}
	if !b.Open() {
		t.Fatal("the circuit is closed; the Decide inside OnChange should have opened it")
	}
}
