package server

import (
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/keys"
	"github.com/floodgate/floodgate/internal/rules"
)

// This file hands each decision to the heavy-hitter tracker
// (Settings.Limited), after the store decided: the denied keys of each
// rule, for GET /debug/limited.

// track counts a Check API call's decisions at now, each under its policy
// or inline limit.
func (r *RateLimiter) track(now time.Time, checks []check, out []algorithms.Decision) {
	if r.limited == nil {
		return
	}
	for i := range checks {
		c := &checks[i]
		if c.req.DryRun {
			continue
		}
		policy := c.rule
		if keys.IsInlineScope(c.req.Scope) {
			policy = ""
		}
		r.limited.ObserveCheck(now, policy, c.shadow, c.req.Limit, keys.CheckKey(c.req.Key), c.req.Cost, out[i].Allowed)
	}
}

// track counts an Envoy request's decisions at now, each under its rule
// with its descriptor's entries. Limits the store did not decide
// (unlimited, deny-all, a request's own override), degraded decisions and
// looks are not counted.
func (e *Envoy) track(now time.Time, entries [][]rules.Entry, checks []envoyCheck) {
	if e.limited == nil {
		return
	}
	for i := range checks {
		c := &checks[i]
		if c.fixed || c.degraded || c.peek || c.limit.ID == "" {
			continue
		}
		e.limited.ObserveEnvoy(now, c.limit, entries[c.desc], c.req.Cost, c.decision.Allowed)
	}
}
