package server

import (
	"context"
	"errors"
	"slices"

	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store"
)

// storeAnswer is how the store answered a call: degraded[k] says request
// k took its failure mode (nil when the store decided every request), and
// err is the store's error when it could not decide some.
type storeAnswer struct {
	degraded []bool
	err      error
}

// any reports whether some request took its failure mode.
func (a storeAnswer) any() bool { return a.degraded != nil }

// storeDecide decides reqs on the store into out; mode is request k's
// failure mode (never rules.FailureDefault), read only when the store
// fails. Failure is judged per store:
//
//   - the store decided: its decisions stand;
//   - it could not decide: every request takes its failure mode
//     (decideFailed);
//   - it decided some requests only (a *store.PartialError, one of two
//     Redis down): the failed ones take their failure mode, and the
//     others, which the store only looked at, are charged in a call of
//     their own when the whole call passes (their looks and the failure
//     answers all allow), so that a deny answered by a failure mode
//     charges nothing on the healthy store. A failure-mode local request
//     is looked at with the others and charged in the replica's share
//     after them.
//
// The error returned is the call's own (its context ended, an invalid
// request); a store that cannot decide is answered, never an error.
func (d *decider) storeDecide(ctx context.Context, b failedBatch, mode func(k int) rules.FailureMode) (storeAnswer, error) {
	err := d.store.Decide(ctx, b.now, b.reqs, b.out)
	if err == nil {
		d.failures.OK(ctx, b.now)
		return storeAnswer{}, nil
	}
	if ctx.Err() != nil || errors.Is(err, store.ErrInvalid) {
		return storeAnswer{err: err}, err
	}
	d.failures.Failed(ctx, b.now, err) // logs transitions and summaries, not each decision
	a := storeAnswer{degraded: make([]bool, len(b.reqs)), err: err}
	b.modes = make([]rules.FailureMode, len(b.reqs))
	for k := range b.reqs {
		b.modes[k] = mode(k)
	}
	pe := store.AsPartial(err)
	outside := func(k int) bool { return k < 0 || k >= len(b.reqs) }
	if pe == nil || len(pe.Failed) == 0 || slices.ContainsFunc(pe.Failed, outside) {
		for k := range a.degraded {
			a.degraded[k] = true
		}
		d.decideFailed(ctx, b)
		return a, nil
	}
	for _, k := range pe.Failed {
		a.degraded[k] = true
	}
	return a, d.decidePartial(ctx, b, a.degraded)
}

// decidePartial answers b, whose requests the store decided as looks but
// for the failed ones, as storeDecide says.
func (d *decider) decidePartial(ctx context.Context, b failedBatch, failed []bool) error {
	var healthy, down store.Batch
	var downModes []rules.FailureMode
	local := false
	for k, r := range b.reqs {
		if !failed[k] {
			healthy.Add(k, r)
			continue
		}
		if b.modes[k] == rules.FailureLocal && !r.DryRun {
			r.DryRun, local = true, true // looked at first, charged last
		}
		down.Add(k, r)
		downModes = append(downModes, b.modes[k])
	}
	d.decideFailed(ctx, failedBatch{now: b.now, reqs: down.Reqs, modes: downModes, out: down.Sized()})
	down.Scatter(b.out)
	for k, r := range b.reqs {
		// A failure answer to a look (a peek) charges nothing and denies
		// nothing else; the store's looks are all or nothing.
		if r.Cost > 0 && !b.out[k].Allowed && (!failed[k] || !r.DryRun) {
			return nil // denied: nothing is charged
		}
	}
	charge := false
	for _, r := range healthy.Reqs {
		charge = charge || !r.DryRun && r.Cost != 0
	}
	if charge {
		err := d.store.Decide(ctx, b.now, healthy.Reqs, healthy.Sized())
		switch {
		case err != nil && (ctx.Err() != nil || errors.Is(err, store.ErrInvalid)):
			return err
		case err != nil:
			// The healthy store failed too: every request by its
			// failure mode (nothing was charged).
			for k := range failed {
				failed[k] = true
			}
			d.decideFailed(ctx, b)
			return nil
		}
		healthy.Scatter(b.out)
		for k, r := range healthy.Reqs {
			if r.Cost > 0 && !healthy.Out[k].Allowed {
				return nil // raced: denied by the healthy store's charge
			}
		}
	}
	if local {
		var l store.Batch
		var modes []rules.FailureMode
		for k, r := range b.reqs {
			if failed[k] && b.modes[k] == rules.FailureLocal {
				l.Add(k, r)
				modes = append(modes, rules.FailureLocal)
			}
		}
		d.decideFailed(ctx, failedBatch{now: b.now, reqs: l.Reqs, modes: modes, out: l.Sized()})
		l.Scatter(b.out)
	}
	return nil
}
