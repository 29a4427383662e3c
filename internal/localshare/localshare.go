// Package localshare decides limits in a replica's own memory with its
// share of each limit: the limits whose failure_mode is local, while the
// shared store cannot decide.
//
// The local counts start empty (what the store admitted before the outage
// is not counted) and outlive the outage until they expire with their
// periods, so the outages of a flapping store within one period spend one
// share, not a fresh share each.
package localshare

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// Share is one replica's local state for failure_mode: local. The zero
// value is not usable; create it with New. It is safe for concurrent use.
type Share struct {
	replicas func() int
	cfg      memstore.Config
	mem      atomic.Pointer[memstore.Store] // nil until a local decision, and after Discard
}

// New returns a Share whose replica count is replicas(), read on every
// decision (nil means 1). cfg bounds the local memory store.
func New(replicas func() int, cfg memstore.Config) *Share {
	if replicas == nil {
		replicas = func() int { return 1 }
	}
	return &Share{replicas: replicas, cfg: cfg}
}

// Replicas is the replica count the shares are computed with: at least 1.
func (s *Share) Replicas() int { return max(s.replicas(), 1) }

// Decide decides reqs together in the replica's memory, each against its
// limit's share (Scale), as store.Store does; out[i].Limit is the share's
// capacity. A cost above the share's capacity is denied with the wait
// until its period ends, never a negative one.
func (s *Share) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	n := s.Replicas()
	scaled := make([]store.Request, len(reqs))
	for i, r := range reqs {
		r.Limit = Scale(r.Limit, n)
		scaled[i] = r
	}
	if err := s.store().Decide(ctx, now, scaled, out); err != nil {
		return fmt.Errorf("local share: %w", err)
	}
	for i := range out {
		if !out[i].Allowed && out[i].RetryAfter < 0 {
			// A cost the share never admits but the whole limit does waits
			// until the limit's period ends or the share is whole, in
			// whole seconds, at least one.
			left := max(PeriodLeft(scaled[i].Limit, now), out[i].ResetAfter, time.Second)
			out[i].RetryAfter = (left + time.Second - 1).Truncate(time.Second)
		}
	}
	return nil
}

// PeriodLeft is how long the period of l that now falls in has left: the
// calendar period's, or the period's aligned to the Unix epoch; 0 for a
// limit with neither.
func PeriodLeft(l algorithms.Limit, now time.Time) time.Duration {
	nowMs := now.UnixMilli()
	if l.Calendar != algorithms.NoCalendar {
		return time.Duration(l.Calendar.Bounds(l.Location, nowMs)[2]-nowMs) * time.Millisecond
	}
	if p := l.Period.Milliseconds(); p > 0 {
		return time.Duration(p-nowMs%p) * time.Millisecond
	}
	return 0
}

// store is the local memory store, created on first use.
func (s *Share) store() *memstore.Store {
	for {
		if m := s.mem.Load(); m != nil {
			return m
		}
		m := memstore.New(s.cfg)
		if s.mem.CompareAndSwap(nil, m) {
			return m
		}
		m.Close() // another call created one first (and a Discard may have dropped it since)
	}
}

// Discard forgets every local count and frees the memory.
func (s *Share) Discard() {
	if m := s.mem.Swap(nil); m != nil {
		m.Close()
	}
}

// Scale is one of replicas' share of l: requests and burst divided,
// rounded down (the shares sum to at most the limit) but at least 1.
func Scale(l algorithms.Limit, replicas int) algorithms.Limit {
	if replicas < 2 {
		return l
	}
	n := int64(replicas)
	l.Requests = max(l.Requests/n, 1)
	if l.Burst > 0 {
		l.Burst = max(l.Burst/n, 1)
	}
	return l
}

// StoreChanged is for the store breaker's OnChange: the local counts are
// kept either way (see the package doc); when the circuit closes and none
// is left, the memory is freed.
func (s *Share) StoreChanged(open bool, _ error) {
	if open {
		return
	}
	if m := s.mem.Load(); m != nil && m.Len() == 0 && s.mem.CompareAndSwap(m, nil) {
		m.Close()
	}
}
