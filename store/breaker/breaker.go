// Package breaker is a circuit breaker around a store.Store. While the store
// is known to be down, Decide fails at once with store.ErrUnavailable
// instead of each call waiting out the store's timeout; a background probe
// pings the store and closes the circuit as soon as it answers, so
// decisions recover within one probe interval of the store's return.
//
// The circuit opens after Threshold consecutive calls that failed with
// store.ErrUnavailable. Any success resets the count. Errors that are not
// the store's fault (the caller's context ending, invalid requests) do not
// count.
package breaker

import (
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
	// OnChange, if set, is called with true when the circuit opens and
	// false when it closes (for logs and metrics).
	OnChange func(open bool)
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
	wg      sync.WaitGroup
}

var _ store.Store = (*Breaker)(nil)

// New wraps next.
func New(next store.Store, cfg Config) *Breaker {
	if cfg.Threshold <= 0 {
		cfg.Threshold = DefaultThreshold
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	return &Breaker{next: next, cfg: cfg, closed: make(chan struct{})}
}

// Open reports whether the circuit is open (the store is known down).
func (b *Breaker) Open() bool { return b.open.Load() }

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

// Ping implements store.Store: it asks the store itself, open or not.
func (b *Breaker) Ping(ctx context.Context) error { return b.next.Ping(ctx) }

// Close stops the probe and closes the wrapped store.
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
	b.wg.Wait()
	return b.next.Close()
}

// record counts err and opens the circuit at the threshold.
func (b *Breaker) record(ctx context.Context, err error) error {
	switch {
	case err == nil:
		b.failures.Store(0)
	case errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil:
		if int(b.failures.Add(1)) >= b.cfg.Threshold {
			b.trip()
		}
	}
	return err
}

// trip opens the circuit and starts the probe, once.
func (b *Breaker) trip() {
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
	if b.cfg.OnChange != nil {
		b.cfg.OnChange(true)
	}
	b.wg.Add(1)
	go b.probe()
}

// probe pings the store every ProbeInterval until it answers, then closes
// the circuit.
func (b *Breaker) probe() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-b.closed:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ProbeTimeout)
		err := b.next.Ping(ctx)
		cancel()
		if err == nil {
			b.mu.Lock()
			b.failures.Store(0)
			b.open.Store(false)
			b.probing = false
			b.mu.Unlock()
			if b.cfg.OnChange != nil {
				b.cfg.OnChange(false)
			}
			return
		}
	}
}
