package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// Decide decides reqs together; see store.Store. It returns an error
// wrapping the context's error when ctx is already done, one wrapping
// store.ErrInvalid for a mismatched out or an invalid limit, and one
// wrapping store.ErrUnavailable after Close or when the requests need new
// entries a full shard has no room for (then nothing is written).
func (s *Store) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: decide: %w", err)
	}
	if err := store.ValidateDecide(reqs, out); err != nil {
		return fmt.Errorf("memstore: decide: %w", err)
	}
	if s.closed.Load() {
		return errClosed
	}
	switch len(reqs) {
	case 0:
		return nil
	case 1:
		return s.decideOne(now.UnixMilli(), &reqs[0], &out[0])
	}
	return s.decide(now.UnixMilli(), reqs, out)
}

// decideOne is Decide for a single request, straight under its shard's
// lock: the common call skips the batch's lock sorting, tentative states
// and second pass.
func (s *Store) decideOne(nowMs int64, r *store.Request, out *algorithms.Decision) error {
	sh := &s.shards[s.shardIndex(r.Key)]
	alg := r.Limit.Algorithm
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.observe(nowMs)
	ek := entryKey(r.Key, r.Scope)
	ref := sh.find(alg, ek, nowMs)
	st := ref.state()
	ar := algorithms.Request{NowMs: nowMs, Cost: r.Cost, Mode: r.Mode}
	if r.DryRun {
		*out = algorithms.Peek(r.Limit, st, ar)
		out.Debt, out.Unrecorded = 0, 0 // Settle reports them
		return nil
	}
	// A log's ring (algorithms.Facts.Log) is updated in place: only this
	// entry holds it, and the shard is locked. A write refused for room
	// never changed a ring in place: it is a new entry, or a ring that
	// grew, which Apply builds as a copy.
	*out = algorithms.Apply(r.Limit, &st, ar, nil)
	out.Debt, out.Unrecorded = 0, 0 // Settle reports them
	if out.Allowed && r.Cost != 0 {
		u := update{alg: alg, key: ek, ref: ref, st: st, ttl: out.TTL}
		entries, bytes := u.growth()
		if err := s.full(sh.room(nowMs, entries, bytes)); err != nil {
			*out = algorithms.Decision{}
			return fmt.Errorf("memstore: decide: %w", err)
		}
		sh.write(&u, nowMs)
	}
	return nil
}

// pending is one (algorithm, key) of a batch: where its entry is and its
// tentative state.
type pending struct {
	update
	sh    *shard
	si    uint32 // sh's index in Store.shards
	dirty bool
}

// smallBatch is the batch size handled without heap allocations.
const smallBatch = 8

// decide is Decide for two or more requests: lock every shard involved
// in ascending order, decide on tentative states, commit only if nothing
// with a positive cost was denied.
func (s *Store) decide(nowMs int64, reqs []store.Request, out []algorithms.Decision) error {
	var idxBuf [smallBatch]uint32
	idx := idxBuf[:0]
	for i := range reqs {
		idx = append(idx, uint32(s.shardIndex(reqs[i].Key)))
	}
	var lockBuf [smallBatch]uint32
	locks := append(lockBuf[:0], idx...)
	slices.Sort(locks)
	locks = slices.Compact(locks)
	for _, i := range locks {
		s.shards[i].mu.Lock()
		s.shards[i].observe(nowMs)
	}
	defer func() {
		for j := len(locks) - 1; j >= 0; j-- {
			s.shards[locks[j]].mu.Unlock()
		}
	}()

	var pendBuf [smallBatch]pending
	pend := pendBuf[:0]
	var index map[pendingKey]int // for large batches only
	if len(reqs) > 2*smallBatch {
		index = make(map[pendingKey]int, len(reqs))
	}
	denied := false
	// Logs are charged in place; undo takes the charges back if the
	// batch is denied or refused.
	var undo algorithms.Undo
	for i := range reqs {
		r := &reqs[i]
		alg := r.Limit.Algorithm
		ek := entryKey(r.Key, r.Scope)
		p := -1
		if index != nil {
			if j, ok := index[pendingKey{alg, ek}]; ok {
				p = j
			}
		} else {
			for j := range pend {
				if pend[j].alg == alg && pend[j].key == ek {
					p = j
					break
				}
			}
		}
		if p < 0 {
			sh := &s.shards[idx[i]]
			ref := sh.find(alg, ek, nowMs)
			pend = append(pend, pending{sh: sh, si: idx[i], update: update{alg: alg, key: ek, ref: ref, st: ref.state()}})
			p = len(pend) - 1
			if index != nil {
				index[pendingKey{alg, ek}] = p
			}
		}
		pe := &pend[p]
		var d algorithms.Decision
		if ar := (algorithms.Request{NowMs: nowMs, Cost: r.Cost, Mode: r.Mode}); r.DryRun {
			d = algorithms.Peek(r.Limit, pe.st, ar)
		} else {
			// A log's ring (algorithms.Facts.Log) is updated in place:
			// only this entry holds it, and the shard is locked.
			d = algorithms.Apply(r.Limit, &pe.st, ar, &undo)
		}
		d.Debt, d.Unrecorded = 0, 0 // Settle reports them
		out[i] = d
		if r.Cost > 0 && !d.Allowed {
			denied = true
		}
		if d.Allowed && r.Cost != 0 && !r.DryRun {
			pe.ttl, pe.dirty = d.TTL, true
		}
	}
	if denied {
		undo.Revert()
		return nil
	}
	// Every shard must have room for all its new entries and bytes before
	// anything is written: a batch that does not fit is refused whole.
	for _, i := range locks {
		entries, bytes := 0, int64(0)
		for j := range pend {
			if pe := &pend[j]; pe.dirty && pe.si == i {
				e, b := pe.growth()
				entries, bytes = entries+e, bytes+b
			}
		}
		if err := s.full(s.shards[i].room(nowMs, entries, bytes)); err != nil {
			undo.Revert()
			clear(out)
			return fmt.Errorf("memstore: decide: %w", err)
		}
	}
	// An insert sweeps a few expired entries, never one a pending points
	// to: those were live at nowMs, and a write keeps them so.
	for j := range pend {
		if pe := &pend[j]; pe.dirty {
			pe.sh.write(&pe.update, nowMs)
		}
	}
	return nil
}

type pendingKey struct {
	alg algorithms.Algorithm
	key string
}
