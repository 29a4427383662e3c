package server

import (
	"context"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store"
)

// How a ShouldRateLimit request is decided.
//
// Without quota mode, every enforced limit of the request goes to the
// store in one call, all or nothing: when one is over, none is charged.
//
// With quota mode on some limit, the answer follows envoyproxy/ratelimit's
// rule (overLimit): the request is over when a limit not in quota mode is
// over, or when every quota-mode descriptor is. A first call looks at
// every enforced limit without charging; if the request passes, a second
// call charges, all or nothing, every limit that fitted (a quota-mode
// descriptor over its quota is not charged, and still answers OVER_LIMIT
// in its own status). A denied request charges nothing.
//
// With CountDeniedHits, a denied request's hits are counted too: every
// enforced limit whose count starts afresh at its window's boundary
// (algorithms.Facts.Afresh) is charged its hits as debt
// (algorithms.Debt), so that the key is denied until the window ends; a
// quota-mode descriptor over its quota in a passing request is charged the
// same way. An algorithm whose state carries into the next window counts
// no denied hits: there a client that
// kept retrying would stay denied for as long as it retried.
//
// Shadow limits are decided last, each on its own, charged only when the
// request passed.

// envoyBatch is one store call at now: the checks it decides (their
// indexes in the request's checks), their store requests and the
// decisions.
type envoyBatch struct {
	now time.Time
	store.Batch
}

// envoyWork is the working memory of a small request, allocated as one
// block: its entries, matches, checks, store requests and decisions.
type envoyWork struct {
	rows    [envoyInline][]rules.Entry
	ents    [2 * envoyInline]rules.Entry
	matches [envoyInline][]*rules.Limit
	checks  [envoyInline]envoyCheck
	reqs    [envoyInline]store.Request
	out     [envoyInline]algorithms.Decision
	idx     [envoyInline]int
	batch   envoyBatch
	over    bool // the request's answer is OVER_LIMIT (decide)
	descs   int  // the request's descriptors
}

// decide runs the store calls of the checks and sets w.over.
func (e *Envoy) decide(ctx context.Context, checks []envoyCheck, w *envoyWork) error {
	b := &w.batch
	b.now, b.Idx, b.Reqs, b.Out = e.clock(), w.idx[:0], w.reqs[:0], w.out[:0]
	quota := false
	for i := range checks {
		quota = quota || checks[i].quota && !checks[i].shadow
	}
	var err error
	if quota {
		err = e.decideQuota(ctx, checks, w)
	} else {
		err = e.decideAll(ctx, checks, b)
	}
	if err != nil {
		return err
	}
	w.over = overLimit(checks, w.descs, e.opts.QuotaMode)
	if e.opts.CountDeniedHits {
		// Every hit of a denied request; a passing request's quota-mode
		// descriptors over their quota.
		if err := e.chargeDebt(ctx, checks, b, func(c *envoyCheck) bool { return w.over || !c.decision.Allowed }); err != nil {
			return err
		}
	}
	return e.decideShadow(ctx, checks, b, !w.over)
}

// decideAll decides the enforced checks in one call, all or nothing; a
// deny-all limit makes it a dry run (the request is denied already).
func (e *Envoy) decideAll(ctx context.Context, checks []envoyCheck, b *envoyBatch) error {
	dry := false
	for i := range checks {
		dry = dry || checks[i].fixed && !checks[i].shadow && !checks[i].decision.Allowed
	}
	for i := range checks {
		if c := &checks[i]; c.enforced() {
			r := c.req
			r.DryRun = r.DryRun || dry
			b.Add(i, r)
		}
	}
	return e.run(ctx, checks, b, true)
}

// decideQuota decides a request with quota-mode limits: a look at every
// enforced check, then, if the request passes, a charge of those that
// fitted.
func (e *Envoy) decideQuota(ctx context.Context, checks []envoyCheck, w *envoyWork) error {
	b := &w.batch
	for i := range checks {
		if c := &checks[i]; c.enforced() {
			r := c.req
			r.DryRun = true
			b.Add(i, r)
		}
	}
	if err := e.run(ctx, checks, b, true); err != nil {
		return err
	}
	if overLimit(checks, w.descs, e.opts.QuotaMode) {
		return nil
	}
	b.Reset()
	for i := range checks {
		if c := &checks[i]; c.enforced() && !c.peek && c.decision.Allowed {
			b.Add(i, c.req)
		}
	}
	return e.run(ctx, checks, b, true)
}

// chargeDebt charges the hits of the enforced checks that pick selects as
// debt, keeping their decisions (a debt charge is always allowed), where
// their algorithm's count starts afresh at its window's boundary.
func (e *Envoy) chargeDebt(ctx context.Context, checks []envoyCheck, b *envoyBatch, pick func(*envoyCheck) bool) error {
	b.Reset()
	for i := range checks {
		if c := &checks[i]; c.enforced() && !c.peek && c.req.Cost > 0 && c.req.Limit.Algorithm.Facts().Afresh && pick(c) {
			r := c.req
			r.Mode |= algorithms.Debt
			b.Add(i, r)
		}
	}
	if len(b.Reqs) == 0 {
		return nil
	}
	return e.run(ctx, checks, b, false)
}

// overLimit is the request's answer, by envoyproxy/ratelimit's rule: over
// when an enforced limit not in quota mode is over, or when there are
// quota-mode descriptors and every one of them is over (a descriptor is
// over its quota when one of its quota-mode limits is). A shadow limit is
// never over, and a shadow quota-mode one is a quota that passed (its
// status is OK); unlimited limits never count. With the server's quota
// mode (global), each of the request's descs descriptors that no limit
// applies to is a quota that passed too, as in the reference. checks are
// in descriptor order.
func overLimit(checks []envoyCheck, descs int, global bool) bool {
	quotaDescs, quotaOver, checked := 0, 0, 0
	for i := 0; i < len(checks); {
		d := checks[i].desc
		checked++
		isQuota, over := false, false
		for ; i < len(checks) && checks[i].desc == d; i++ {
			c := &checks[i]
			switch {
			case c.limit.Unlimited: // no quota descriptor
			case c.shadow:
				isQuota = isQuota || c.quota
			case !c.quota && !c.decision.Allowed:
				return true
			case c.quota:
				isQuota = true
				over = over || !c.decision.Allowed
			}
		}
		if isQuota {
			quotaDescs++
			if over {
				quotaOver++
			}
		}
	}
	if global {
		quotaDescs += descs - checked
	}
	return quotaDescs > 0 && quotaOver == quotaDescs
}

// decideShadow decides the shadow limits, each on its own, charged only
// when the request passed (allowed).
func (e *Envoy) decideShadow(ctx context.Context, checks []envoyCheck, b *envoyBatch, allowed bool) error {
	for i := range checks {
		c := &checks[i]
		if !c.shadow || c.fixed {
			continue
		}
		r := c.req
		r.DryRun = r.DryRun || !allowed
		b.Reset()
		b.Add(i, r)
		if err := e.run(ctx, checks, b, true); err != nil {
			return err
		}
	}
	return nil
}

// run asks the store for b's decisions and, with record, writes them to
// the checks. When the store cannot decide, each limit's failure mode
// answers (and marks the check degraded).
func (e *Envoy) run(ctx context.Context, checks []envoyCheck, b *envoyBatch, record bool) error {
	if len(b.Reqs) == 0 {
		return nil
	}
	mode := func(k int) rules.FailureMode { return e.modeOf(checks[b.Idx[k]].limit.FailureMode) }
	a, err := e.storeTraced(ctx, failedBatch{now: b.now, reqs: b.Reqs, out: b.Sized()}, mode,
		func(k int) spanLimit { return checks[b.Idx[k]].spanLimit() })
	if err != nil {
		return err
	}
	if a.any() {
		for k, i := range b.Idx {
			if !a.degraded[k] {
				continue
			}
			if checks[i].peek && mode(k) == rules.FailureClosed {
				// A closed limit denies what would spend; a 0-hit
				// check spends nothing.
				b.Out[k].Allowed, b.Out[k].RetryAfter = true, 0
			}
			if record {
				checks[i].degraded = true
				checks[i].local = mode(k) == rules.FailureLocal
			}
		}
	}
	if record {
		for k, i := range b.Idx {
			checks[i].decision = b.Out[k]
		}
	}
	return nil
}
