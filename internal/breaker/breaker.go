// Package breaker is a circuit breaker around a store.Store. While the store
// is known to be down, Decide fails at once with store.ErrUnavailable
// instead of each call waiting out the store's timeout; a probe closes the
// circuit as soon as the store answers. The circuit opens after Threshold
// consecutive unavailable calls or pings (other errors do not count), so
// it follows the store even when no traffic comes.
package breaker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// Defaults for Config's zero values.
const (
	DefaultThreshold     = 3
	DefaultProbeInterval = 100 * time.Millisecond
	DefaultProbeTimeout  = 250 * time.Millisecond
	DefaultCheckInterval = 250 * time.Millisecond
)

// ErrOpen is returned while the circuit is open. It wraps
// store.ErrUnavailable.
var ErrOpen = fmt.Errorf("circuit open: %w", store.ErrUnavailable)

// Config tunes a Breaker. The zero value is usable.
type Config struct {
	// Threshold is how many consecutive unavailable errors open the
	// circuit. 0 means DefaultThreshold.
	Threshold int
	// ProbeInterval is how often an open circuit pings the store. 0 means
	// DefaultProbeInterval.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one ping. 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// CheckInterval is how often a closed circuit pings the store, a ping
	// counting as a call. 0 means DefaultCheckInterval; negative: never.
	CheckInterval time.Duration
	// OnChange, if set, is called when the circuit opens (true and the
	// error that opened it), when it closes (false, nil), and while open
	// when the probe's error turns from an outage into a misconfiguration
	// (store.ErrMisconfigured) or back. It runs on the Breaker's own
	// goroutine, one call at a time, in order, holding no lock, so it
	// delays no call and may call every method but Close (which waits for
	// it).
	OnChange func(open bool, cause error)
}

// Breaker is a store.Store that fails fast while the wrapped store is down.
type Breaker struct {
	next     store.Store
	cfg      Config
	failures atomic.Int32
	open     atomic.Bool

	mu      sync.Mutex
	probing bool
	closed  chan struct{}
	wg      sync.WaitGroup // the probe and the check

	// The transitions OnChange has yet to hear, oldest first: appended
	// under mu where the state changes, delivered by notify.
	pending  []change      // guarded by mu
	wake     chan struct{} // closed by Close once no transition can come
	notified chan struct{} // closed when notify has delivered all and exited
}

// change is one transition for OnChange.
type change struct {
	open  bool
	cause error
}

var _ store.Store = (*Breaker)(nil)

// New wraps next.
func New(next store.Store, cfg Config) *Breaker {
	cfg.Threshold = cmp.Or(max(cfg.Threshold, 0), DefaultThreshold)
	cfg.ProbeInterval = cmp.Or(max(cfg.ProbeInterval, 0), DefaultProbeInterval)
	cfg.ProbeTimeout = cmp.Or(max(cfg.ProbeTimeout, 0), DefaultProbeTimeout)
	cfg.CheckInterval = cmp.Or(cfg.CheckInterval, DefaultCheckInterval) // negative: never
	b := &Breaker{next: next, cfg: cfg, closed: make(chan struct{})}
	if cfg.OnChange != nil {
		b.wake = make(chan struct{}, 1)
		b.notified = make(chan struct{})
		go b.notify()
	}
	if cfg.CheckInterval > 0 {
		b.wg.Go(b.check)
	}
	return b
}

// Decide implements store.Store.
func (b *Breaker) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	if b.open.Load() {
		return ErrOpen
	}
	return b.record(ctx, b.next.Decide(ctx, now, reqs, out))
}

// Reset implements store.Store.
func (b *Breaker) Reset(ctx context.Context, alg algorithms.Algorithm, key string, scopes ...string) error {
	if b.open.Load() {
		return ErrOpen
	}
	return b.record(ctx, b.next.Reset(ctx, alg, key, scopes...))
}

// Settle implements store.Settler when the wrapped store does, failing
// fast like Decide while the breaker is open.
func (b *Breaker) Settle(ctx context.Context, now time.Time, s store.Settlement) (store.SettleResult, error) {
	st, ok := b.next.(store.Settler)
	if !ok {
		return store.SettleResult{}, fmt.Errorf("breaker: settle: %w: %T cannot settle", store.ErrInvalid, b.next)
	}
	if b.open.Load() {
		return store.SettleResult{}, ErrOpen
	}
	r, err := st.Settle(ctx, now, s)
	if errors.Is(err, store.ErrSettleConflict) || errors.Is(err, store.ErrInvalid) {
		return r, err // an answer about the request, not the store's health
	}
	return r, b.record(ctx, err)
}

// Ping implements store.Store: it asks the store itself, open or not.
func (b *Breaker) Ping(ctx context.Context) error { return b.next.Ping(ctx) }

// Close stops the probe and the check, waits for OnChange to hear every
// transition made before, and closes the wrapped store.
func (b *Breaker) Close() error {
	b.mu.Lock()
	select {
	case <-b.closed:
		b.mu.Unlock()
		return nil
	default:
		close(b.closed)
	}
	b.mu.Unlock()
	b.wg.Wait() // no transition after this: trip checks closed under mu
	if b.notified != nil {
		close(b.wake)
		<-b.notified
	}
	return b.next.Close()
}

// changed queues a transition for OnChange. b.mu must be held, so the
// queue's order is the order of the transitions.
func (b *Breaker) changed(open bool, cause error) {
	if b.cfg.OnChange == nil {
		return
	}
	b.pending = append(b.pending, change{open, cause})
	select {
	case b.wake <- struct{}{}:
	default: // notify is already due to look
	}
}

// notify delivers the queued transitions to OnChange, in order and
// without b.mu, until Close closes wake.
func (b *Breaker) notify() {
	defer close(b.notified)
	for range b.wake {
		for {
			b.mu.Lock()
			batch := b.pending
			b.pending = nil
			b.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, c := range batch {
				b.cfg.OnChange(c.open, c.cause)
			}
		}
	}
}

// record counts err and opens the circuit at the threshold.
func (b *Breaker) record(ctx context.Context, err error) error {
	switch {
	case err == nil:
		b.failures.Store(0)
	case errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil:
		if int(b.failures.Add(1)) >= b.cfg.Threshold {
			b.trip(err)
		}
	}
	return err
}

// trip opens the circuit and starts the probe, once; cause opened it.
func (b *Breaker) trip(cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.closed:
		return
	default:
	}
	if b.probing {
		return
	}
	b.probing = true
	b.open.Store(true)
	b.changed(true, cause)
	misconfigured := errors.Is(cause, store.ErrMisconfigured)
	b.wg.Go(func() { b.probe(misconfigured) })
}

// probe pings the store every ProbeInterval until it answers, then closes
// the circuit. misconfigured says whether the cause last reported to
// OnChange wraps store.ErrMisconfigured; a ping that says otherwise is
// reported again.
func (b *Breaker) probe(misconfigured bool) {
	b.every(b.cfg.ProbeInterval, func() bool {
		err := b.ping()
		if err == nil {
			b.mu.Lock()
			b.failures.Store(0)
			b.open.Store(false)
			b.probing = false
			b.changed(false, nil)
			b.mu.Unlock()
			return true
		}
		if m := errors.Is(err, store.ErrMisconfigured); m != misconfigured && errors.Is(err, store.ErrUnavailable) {
			misconfigured = m
			b.mu.Lock()
			b.changed(true, err)
			b.mu.Unlock()
		}
		return false
	})
}

// check pings the store every CheckInterval while the circuit is closed,
// counting the answers like calls' (see record), until Close.
func (b *Breaker) check() {
	b.every(b.cfg.CheckInterval, func() bool {
		if b.open.Load() {
			return false // the probe pings
		}
		_ = b.record(context.Background(), b.ping())
		return false
	})
}

// ping pings the store for at most ProbeTimeout; running out of that time
// is the store's failure, so its error wraps store.ErrUnavailable.
func (b *Breaker) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ProbeTimeout)
	defer cancel()
	err := b.next.Ping(ctx)
	if err != nil && ctx.Err() != nil && !errors.Is(err, store.ErrUnavailable) {
		err = fmt.Errorf("%w: no answer to a ping within %v: %w", store.ErrUnavailable, b.cfg.ProbeTimeout, err)
	}
	return err
}

// every calls f every interval until Close, or until f returns true.
func (b *Breaker) every(interval time.Duration, f func() (stop bool)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-b.closed:
			return
		case <-t.C:
		}
		if f() {
			return
		}
	}
}
