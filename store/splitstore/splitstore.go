// Package splitstore decides the requests of one call on two stores: the
// per-second limits on one (envoyproxy/ratelimit's REDIS_PERSECOND_*
// Redis) and the others on the main one.
//
// Each store is all or nothing by itself. A call with requests on both is
// decided in four steps (Store.decideBoth):
//
//  1. the main store's requests are looked at (a dry run); when one is
//     denied, the per-second ones are looked at too and nothing is charged;
//  2. the per-second requests are charged, all or nothing, their refunds
//     and debts (algorithms.Debt) only looked at; when one is denied,
//     nothing is charged anywhere;
//  3. the main store's requests are charged, refunds included; when one is
//     now denied (another call took the room since step 1), the per-second
//     charges are given back by refunds of their costs;
//  4. the call passed: the per-second refunds and debts are made (a debt
//     is always allowed; charged in step 2, its give-back would refund
//     the part it did not record too).
//
// So a denied call charges nothing on either store, except when the main
// store changed between steps 1 and 3 and the give-back cannot restore the
// count (an algorithm that waits frees no slot, algorithms.Facts.Waits) or
// fails. A per-second refund comes after the call's charges, so it may
// deny a charge a single store would admit; a debt too, so a charge of
// the same key after it in the call, which a single store would decide
// on the debt, is decided before it.
//
// Failure is judged per store: when one store cannot decide, Decide
// returns a *store.PartialError naming its requests, with the other
// store's decisions as looks, so only the failed store's limits take their
// failure mode.
package splitstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// Store routes each request to the per-second store when its limit's
// period is one second, else to the main store.
type Store struct {
	main, perSecond store.Store
}

// New returns a Store deciding per-second limits on perSecond and the
// others on main. Close closes both.
func New(main, perSecond store.Store) *Store {
	return &Store{main: main, perSecond: perSecond}
}

// perSecond reports whether l is decided on the per-second store: a
// period of exactly one second, as the reference's unit: second.
func perSecond(l algorithms.Limit) bool { return l.Period == time.Second }

// side is the requests of a call that go to one store, with their
// indexes in the call.
type side struct {
	st store.Store
	store.Batch
}

// decide decides the side's requests, as dry runs when dry; with
// holdRefunds, its refunds and debts (held) are dry runs too. It reports
// whether one with a positive cost was denied.
func (s *side) decide(ctx context.Context, now time.Time, dry, holdRefunds bool) (denied bool, err error) {
	reqs := s.Reqs
	if dry || holdRefunds && slices.ContainsFunc(s.Reqs, held) {
		reqs = make([]store.Request, len(s.Reqs))
		for i, r := range s.Reqs {
			r.DryRun = r.DryRun || dry || holdRefunds && held(r)
			reqs[i] = r
		}
	}
	out := s.Sized()
	if err := s.st.Decide(ctx, now, reqs, out); err != nil {
		return false, err
	}
	for i, r := range reqs {
		if r.Cost > 0 && !out[i].Allowed {
			return true, nil
		}
	}
	return false, nil
}

// held reports whether r is made only once the call passed: a refund, or
// a debt, which is always allowed.
func held(r store.Request) bool {
	return !r.DryRun && (r.Cost < 0 || r.Cost > 0 && r.Mode&algorithms.Debt != 0)
}

// giveBack refunds what the side's last decide charged.
func (s *side) giveBack(ctx context.Context, now time.Time) error {
	var back []store.Request
	for i, r := range s.Reqs {
		if r.Cost > 0 && !r.DryRun && !held(r) && s.Out[i].Allowed {
			back = append(back, store.Request{Key: r.Key, Scope: r.Scope, Limit: r.Limit, Cost: -r.Cost})
		}
	}
	if len(back) == 0 {
		return nil
	}
	return s.st.Decide(ctx, now, back, make([]algorithms.Decision, len(back)))
}

// refund makes the side's refunds and debts that its last decide held
// back, and answers them with their decisions. When the store fails,
// they are not made and keep the decisions of their look.
func (s *side) refund(ctx context.Context, now time.Time) {
	var b store.Batch
	for k, r := range s.Reqs {
		if held(r) {
			b.Add(k, r)
		}
	}
	if len(b.Reqs) == 0 {
		return
	}
	if err := s.st.Decide(ctx, now, b.Reqs, b.Sized()); err != nil {
		return
	}
	b.Scatter(s.Out)
}

// partial is the error of a call whose failed side could not decide
// while the other answered looks.
func partial(failed *side, err error) error {
	return &store.PartialError{Failed: append([]int(nil), failed.Idx...), Err: err}
}

// Decide decides reqs as the package comment says.
func (s *Store) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	if err := store.ValidateDecide(reqs, out); err != nil {
		return err // before either store charges, and not as one side's failure
	}
	main, sec := side{st: s.main}, side{st: s.perSecond}
	for i, r := range reqs {
		if perSecond(r.Limit) {
			sec.Add(i, r)
		} else {
			main.Add(i, r)
		}
	}
	switch {
	case len(sec.Reqs) == 0:
		return s.main.Decide(ctx, now, reqs, out)
	case len(main.Reqs) == 0:
		return s.perSecond.Decide(ctx, now, reqs, out)
	}
	err := s.decideBoth(ctx, now, &main, &sec)
	var pe *store.PartialError
	if err != nil && !errors.As(err, &pe) {
		return err
	}
	for _, sd := range []*side{&main, &sec} {
		if pe == nil || sd.Idx[0] != pe.Failed[0] {
			sd.Scatter(out)
		}
	}
	return err
}

// decideBoth runs the four steps on a call with requests on both stores.
// A *store.PartialError names the side that failed; the other side's
// Out then holds looks.
func (s *Store) decideBoth(ctx context.Context, now time.Time, main, sec *side) error {
	denied, err := main.decide(ctx, now, true, false)
	if err != nil {
		if _, secErr := sec.decide(ctx, now, true, false); secErr != nil {
			return errors.Join(err, secErr)
		}
		return partial(main, err)
	}
	if denied {
		if _, err := sec.decide(ctx, now, true, false); err != nil {
			return partial(sec, err)
		}
		return nil
	}
	if denied, err = sec.decide(ctx, now, false, true); err != nil {
		return partial(sec, err)
	}
	if denied {
		return nil // main's decisions are its look's
	}
	denied, err = main.decide(ctx, now, false, false)
	if err != nil || denied {
		// Raced, or main failed: give the per-second charges back. A
		// failed give-back leaves them: a denied call still answers its
		// decisions, and a failed one is not partial (the caller must not
		// charge the per-second side again).
		gbErr := sec.giveBack(ctx, now)
		switch {
		case err != nil && gbErr != nil:
			return errors.Join(err, fmt.Errorf("giving back the per-second charges: %w", gbErr))
		case err != nil:
			return partial(main, err)
		}
		return nil
	}
	sec.refund(ctx, now)
	return nil
}

// Reset forgets key on both stores.
func (s *Store) Reset(ctx context.Context, alg algorithms.Algorithm, key string, scopes ...string) error {
	return errors.Join(s.main.Reset(ctx, alg, key, scopes...), s.perSecond.Reset(ctx, alg, key, scopes...))
}

// Ping reports whether both stores can decide.
func (s *Store) Ping(ctx context.Context) error {
	return errors.Join(s.main.Ping(ctx), s.perSecond.Ping(ctx))
}

// Close closes both stores.
func (s *Store) Close() error { return errors.Join(s.main.Close(), s.perSecond.Close()) }

// Settle settles on the store the settlement's limit goes to. It fails
// when that store cannot settle.
func (s *Store) Settle(ctx context.Context, now time.Time, st store.Settlement) (store.SettleResult, error) {
	target := s.main
	if perSecond(st.Limit) {
		target = s.perSecond
	}
	settler, ok := target.(store.Settler)
	if !ok {
		return store.SettleResult{}, fmt.Errorf("%w: the store of this limit cannot settle", store.ErrInvalid)
	}
	return settler.Settle(ctx, now, st)
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Settler = (*Store)(nil)
)
