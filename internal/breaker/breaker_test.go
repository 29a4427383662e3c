package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/breaker"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// flaky is a store that fails with ErrUnavailable while down is set; it
// decides with a real memstore otherwise. An in-process stand-in for a
// Redis that comes and goes (the e2e tests kill a real one).
type flaky struct {
	store.Store
	down          atomic.Bool
	misconfigured atomic.Bool // while down: pings say misconfigured
	calls         atomic.Int32
	pings         atomic.Int32
}

var errCluster = fmt.Errorf("%w: a Redis Cluster node", store.ErrMisconfigured)

var errDown = errors.New("dial tcp: connection refused")

func (f *flaky) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	f.calls.Add(1)
	if f.down.Load() {
		return errors.Join(store.ErrUnavailable, errDown)
	}
	return f.Store.Decide(ctx, now, reqs, out)
}

func (f *flaky) Ping(ctx context.Context) error {
	f.pings.Add(1)
	if f.down.Load() && f.misconfigured.Load() {
		return errCluster
	}
	if f.down.Load() {
		return errors.Join(store.ErrUnavailable, errDown)
	}
	return nil
}

var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func req() []store.Request {
	return []store.Request{{Key: "k", Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Second}, Cost: 1}}
}

func TestBreakerOpensFailsFastAndRecovers(t *testing.T) {
	f := &flaky{Store: memstore.New(memstore.Config{})}
	var changes []bool
	changed := make(chan bool, 4)
	b := breaker.New(f, breaker.Config{Threshold: 2, ProbeInterval: time.Millisecond, CheckInterval: -1, OnChange: func(open bool, _ error) { changed <- open }})
	defer b.Close()
	ctx := context.Background()
	out := make([]algorithms.Decision, 1)

	if err := b.Decide(ctx, t0, req(), out); err != nil || !out[0].Allowed {
		t.Fatalf("healthy store: got %v %v", out[0], err)
	}
	f.down.Store(true)
	for i := range 2 {
		if err := b.Decide(ctx, t0, req(), out); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("failure %d: got %v, want the store's own unavailable error", i, err)
		}
	}
	changes = append(changes, <-changed)
	if !b.Open() {
		t.Fatal("circuit still closed after 2 failures")
	}
	calls := f.calls.Load()
	for range 100 {
		if err := b.Decide(ctx, t0, req(), out); !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("open circuit: got %v, want ErrOpen", err)
		}
	}
	if f.calls.Load() != calls {
		t.Fatalf("open circuit reached the store %d times", f.calls.Load()-calls)
	}
	f.down.Store(false)
	changes = append(changes, <-changed) // the probe saw the store back
	if b.Open() {
		t.Fatal("circuit still open after the store came back")
	}
	if err := b.Decide(ctx, t0, req(), out); err != nil || !out[0].Allowed {
		t.Fatalf("after recovery: got %v %v", out[0], err)
	}
	if len(changes) != 2 || !changes[0] || changes[1] {
		t.Fatalf("OnChange calls: got %v, want [true false]", changes)
	}
}

func TestBreakerIgnoresCallerErrors(t *testing.T) {
	f := &flaky{Store: memstore.New(memstore.Config{})}
	b := breaker.New(f, breaker.Config{Threshold: 1, CheckInterval: -1})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := make([]algorithms.Decision, 1)
	for range 5 {
		_ = b.Decide(ctx, t0, req(), out)
	}
	if b.Open() {
		t.Fatal("a cancelled caller opened the circuit")
	}
	if err := b.Decide(context.Background(), t0, req(), make([]algorithms.Decision, 2)); err == nil || b.Open() {
		t.Fatalf("invalid request: got %v open=%v, want an error and a closed circuit", err, b.Open())
	}
}

func TestBreakerSuccessResetsCount(t *testing.T) {
	f := &flaky{Store: memstore.New(memstore.Config{})}
	b := breaker.New(f, breaker.Config{Threshold: 2, CheckInterval: -1})
	defer b.Close()
	ctx := context.Background()
	out := make([]algorithms.Decision, 1)
	for range 5 {
		f.down.Store(true)
		_ = b.Decide(ctx, t0, req(), out)
		f.down.Store(false)
		if err := b.Decide(ctx, t0, req(), out); err != nil {
			t.Fatal(err)
		}
	}
	if b.Open() {
		t.Fatal("alternating failures opened the circuit")
	}
}

func TestBreakerCloseIsIdempotent(t *testing.T) {
	f := &flaky{Store: memstore.New(memstore.Config{})}
	f.down.Store(true)
	b := breaker.New(f, breaker.Config{Threshold: 1, ProbeInterval: time.Hour})
	_ = b.Decide(context.Background(), t0, req(), make([]algorithms.Decision, 1))
	if !b.Open() {
		t.Fatal("not open")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBreakerCheckOpensWithoutTraffic: with no call at all, the check's
// pings open the circuit when the store goes down (OnChange gets the
// store's error) and the probe closes it when the store returns. Before
// the check existed, an idle breaker (and the health built on it) said
// "closed" for as long as no call came.
func TestBreakerCheckOpensWithoutTraffic(t *testing.T) {
	f := &flaky{Store: memstore.New(memstore.Config{})}
	type change struct {
		open  bool
		cause error
	}
	changed := make(chan change, 4)
	b := breaker.New(f, breaker.Config{Threshold: 2, ProbeInterval: time.Millisecond, CheckInterval: time.Millisecond,
		OnChange: func(open bool, cause error) { changed <- change{open, cause} }})
	defer b.Close()
	waitPings := func(n int32) {
		t.Helper()
		for start := f.pings.Load(); f.pings.Load() < start+n; {
			time.Sleep(time.Millisecond)
		}
	}
	waitPings(5)
	if b.Open() || len(changed) > 0 {
		t.Fatal("circuit opened while the store was up")
	}
	f.down.Store(true)
	select {
	case c := <-changed:
		if !c.open || !errors.Is(c.cause, errDown) {
			t.Fatalf("OnChange(%v, %v), want (true, the ping's error)", c.open, c.cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the circuit did not open without traffic")
	}
	if f.calls.Load() != 0 {
		t.Fatalf("%d calls reached the store; the test makes none", f.calls.Load())
	}
	f.down.Store(false)
	if c := <-changed; c.open || c.cause != nil {
		t.Fatalf("OnChange(%v, %v), want (false, nil)", c.open, c.cause)
	}
}

// TestBreakerCheckDisabled: a negative CheckInterval pings nothing.
func TestBreakerCheckDisabled(t *testing.T) {
	f := &flaky{Store: memstore.New(memstore.Config{})}
	f.down.Store(true)
	b := breaker.New(f, breaker.Config{Threshold: 1, CheckInterval: -1, ProbeInterval: time.Millisecond})
	time.Sleep(20 * time.Millisecond) // a window for pings that must not come
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := f.pings.Load(); n != 0 || b.Open() {
		t.Fatalf("%d pings, open=%v, want none and closed", n, b.Open())
	}
}

// TestBreakerReportsMisconfiguration: an open circuit whose probe starts
// finding a misconfiguration instead of an outage tells OnChange once
// more (so the operator hears of it once, however long it lasts).
func TestBreakerReportsMisconfiguration(t *testing.T) {
	f := &flaky{Store: memstore.New(memstore.Config{})}
	type change struct {
		open  bool
		cause error
	}
	changed := make(chan change, 16)
	b := breaker.New(f, breaker.Config{Threshold: 1, ProbeInterval: time.Millisecond, CheckInterval: -1,
		OnChange: func(open bool, cause error) { changed <- change{open, cause} }})
	defer b.Close()
	f.down.Store(true)
	_ = b.Decide(context.Background(), t0, req(), make([]algorithms.Decision, 1))
	if c := <-changed; !c.open || errors.Is(c.cause, store.ErrMisconfigured) {
		t.Fatalf("OnChange(%v, %v), want open by an outage", c.open, c.cause)
	}
	f.misconfigured.Store(true)
	if c := <-changed; !c.open || !errors.Is(c.cause, store.ErrMisconfigured) {
		t.Fatalf("OnChange(%v, %v), want open by a misconfiguration", c.open, c.cause)
	}
	for start := f.pings.Load(); f.pings.Load() < start+20; {
		time.Sleep(time.Millisecond)
	}
	if len(changed) != 0 {
		t.Fatalf("%d more OnChange calls while the misconfiguration lasted, want none", len(changed))
	}
	f.down.Store(false)
	if c := <-changed; c.open {
		t.Fatalf("OnChange(%v, %v), want closed", c.open, c.cause)
	}
}

// hung is a store whose pings never answer: each waits for its context to
// end and returns the context's error, as redisstore's Ping does when the
// caller's deadline passes before its own timeout (a Redis that accepts
// connections and never replies, with --redis-timeout above the ping's
// timeout).
type hung struct {
	store.Store
	pings atomic.Int32
}

func (h *hung) Ping(ctx context.Context) error {
	h.pings.Add(1)
	<-ctx.Done()
	return fmt.Errorf("redisstore: ping: %w", ctx.Err())
}

// TestBreakerCheckCountsHungPings: a check ping that outlives its own
// timeout is the store's failure, not a caller's, so the circuit opens
// without traffic. It stayed closed before: the check counted only
// errors wrapping ErrUnavailable from a ping whose context had not ended.
func TestBreakerCheckCountsHungPings(t *testing.T) {
	h := &hung{Store: memstore.New(memstore.Config{})}
	changed := make(chan error, 4)
	b := breaker.New(h, breaker.Config{Threshold: 2, ProbeInterval: time.Millisecond, ProbeTimeout: 5 * time.Millisecond,
		CheckInterval: time.Millisecond, OnChange: func(open bool, cause error) {
			if open {
				changed <- cause
			}
		}})
	defer b.Close()
	select {
	case cause := <-changed:
		if !errors.Is(cause, store.ErrUnavailable) || !errors.Is(cause, context.DeadlineExceeded) {
			t.Fatalf("opened by %v, want an unavailable error wrapping the ping's deadline", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("circuit still closed after %d hung pings", h.pings.Load())
	}
	if !b.Open() {
		t.Fatal("Open() = false after OnChange(true)")
	}
}

// deadlines is a store whose pings report how long their context had.
type deadlines struct {
	store.Store
	left chan time.Duration
}

func (d *deadlines) Ping(ctx context.Context) error {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(time.Hour)
	}
	select {
	case d.left <- time.Until(dl):
	default:
	}
	return nil
}

// TestBreakerDefaultProbeTimeout: a zero ProbeTimeout bounds each ping by
// DefaultProbeTimeout.
func TestBreakerDefaultProbeTimeout(t *testing.T) {
	d := &deadlines{Store: memstore.New(memstore.Config{}), left: make(chan time.Duration, 1)}
	b := breaker.New(d, breaker.Config{CheckInterval: time.Millisecond})
	defer b.Close()
	select {
	case left := <-d.left:
		if left > breaker.DefaultProbeTimeout || left <= breaker.DefaultProbeTimeout/2 {
			t.Errorf("a check ping had %v, want about DefaultProbeTimeout (%v)", left, breaker.DefaultProbeTimeout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no check ping in 10s")
	}
}
