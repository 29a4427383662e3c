// Package localshare decides limits in a replica's own memory with its
// share of each limit: the limits whose failure_mode is local, while the
// shared store cannot decide.
//
// The share of a limit is its requests (and its burst) divided by the
// number of replicas, rounded down but at least 1, with the same
// algorithm and period (Scale). When every replica gets its share of the
// traffic and the replica count is right, the replicas together admit at
// most the limit per period (at most max(limit, replicas) when the limit
// is below the count, since every replica admits at least 1). The local
// counts start empty: what the store admitted before the outage, in the
// window the outage starts in, is not counted locally. They outlive the
// outage: when the store decides again they are kept until they expire
// with their periods, so that the outages of a flapping store within one
// period spend one share, not a fresh share each.
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

// New returns a Share whose replica count is replicas() (read on every
// decision; a count below 1 counts as 1). nil replicas means 1: the whole
// limit is enforced locally. cfg bounds the local memory store, created on
// the first local decision.
func New(replicas func() int, cfg memstore.Config) *Share {
	if replicas == nil {
		replicas = func() int { return 1 }
	}
	return &Share{replicas: replicas, cfg: cfg}
}

// Replicas is the replica count the shares are computed with: at least 1.
func (s *Share) Replicas() int { return max(s.replicas(), 1) }

// Decide decides reqs together in the replica's memory, each against its
// limit's share (Scale); see store.Store. out[i].Limit is then the share's
// capacity. A cost above the share's capacity (which the limit itself
// admits) is denied with the wait until its period ends (overShareWait),
// never a negative one. An error means nothing was decided: a share that is not a
// valid limit (store.ErrInvalid; a bucket's rate too fine-grained once
// divided), a context that ended, or a Discard racing the call
// (store.ErrUnavailable).
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
			out[i].RetryAfter = overShareWait(scaled[i].Limit, out[i], now)
		}
	}
	return nil
}

// overShareWait is the retry_after of a cost above the share's capacity:
// the share never admits it, the whole limit does once the store decides
// again, so the caller is told to come back when the limit's period ends
// (a calendar period's end; otherwise the period aligned to the Unix
// epoch, as the windows are), or when the share is whole again if that
// is later. It is rounded up to a whole second, at least one, so that a
// body in seconds and a Retry-After header say the same.
func overShareWait(l algorithms.Limit, d algorithms.Decision, now time.Time) time.Duration {
	nowMs := now.UnixMilli()
	var left time.Duration
	if l.Calendar != algorithms.NoCalendar {
		b := l.Calendar.Bounds(l.Location, nowMs)
		left = time.Duration(b[2]-nowMs) * time.Millisecond
	} else if p := l.PeriodMs(); p > 0 {
		left = time.Duration(p-nowMs%p) * time.Millisecond
	}
	left = max(left, d.ResetAfter, time.Second)
	return (left + time.Second - 1).Truncate(time.Second)
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

// Discard forgets every local count and frees the memory, for a server
// that stops. It costs an atomic load when there is nothing to discard.
func (s *Share) Discard() {
	if s.mem.Load() == nil {
		return
	}
	if m := s.mem.Swap(nil); m != nil {
		m.Close()
	}
}

// Active reports whether there are local counts (a local decision was
// made since the last Discard).
func (s *Share) Active() bool { return s.mem.Load() != nil }

// Scale is replicas' share of l: requests, and its burst when set, divided by replicas and rounded down, at least 1; the algorithm and
// the period stay. Rounding down keeps the sum of the shares at most the
// limit; the minimum of 1 keeps every replica admitting something when
// the limit is below the replica count. replicas below 2 return l.
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

// StoreChanged is for the store breaker's OnChange. The local counts are
// kept whichever way the circuit goes: a closing circuit (open false)
// that discarded them would let the next outage in the same period admit
// a whole share again, and a store that flaps would admit a share per
// outage. They expire with their periods (the memory store's TTLs); when
// the circuit closes and none is left, the memory is freed.
func (s *Share) StoreChanged(open bool, _ error) {
	if open {
		return
	}
	if m := s.mem.Load(); m != nil && m.Len() == 0 && s.mem.CompareAndSwap(m, nil) {
		m.Close()
	}
}
