package server

import (
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/ratelimitheader"
	"github.com/floodgate/floodgate/server/config"
)

// answer fills the statuses, the overall code and the headers.
//
// A descriptor's status is its most restrictive enforced limit. Shadow
// limits never shape a status's numbers or the headers (they show in the
// metrics): a descriptor with only shadow limits answers OK with no
// current_limit, so Envoy's own X-RateLimit-* headers skip it too. A limit
// the store could not decide (degraded) sets the code its failure mode
// gives, but no current_limit, limit_remaining or duration_until_reset:
// nothing is known about its quota, and a zero would tell the client "none
// left, retry now".
func (e *Envoy) answer(resp *rlsv3.RateLimitResponse, req *rlsv3.RateLimitRequest, checks []envoyCheck) {
	best := make([]int, len(resp.Statuses))
	for i := range best {
		best[i] = -1
	}
	degraded := false
	for i := range checks {
		c := &checks[i]
		if c.limit.Unlimited || c.shadow {
			continue
		}
		degraded = degraded || c.degraded
		if b := best[c.desc]; b < 0 || moreRestrictive(c, &checks[b]) {
			best[c.desc] = i
		}
	}
	headline := -1 // the check the headers describe
	for d, b := range best {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		resp.Statuses[d] = st
		if b < 0 {
			continue
		}
		c := &checks[b]
		if !c.decision.Allowed {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if c.degraded {
			continue
		}
		st.CurrentLimit = currentLimit(c.limit)
		st.LimitRemaining = uint32(min(max(c.decision.Remaining, 0), 1<<32-1))
		reset := c.decision.ResetAfter
		if c.limit.DenyAll {
			reset = ratelimitheader.NeverSeconds * time.Second
		}
		st.DurationUntilReset = durationpb.New(reset)
		if headline < 0 || moreRestrictive(c, &checks[headline]) {
			headline = b
		}
	}
	if !e.headers {
		return
	}
	var buf [8]ratelimitheader.Field
	fs := buf[:0]
	retryAfter := false
	if headline >= 0 {
		c := &checks[headline]
		retryAfter = !c.decision.Allowed
		fs = ratelimitheader.Append(fs, headerLimit(c.limit), ratelimitheader.State{
			Remaining:  c.decision.Remaining,
			ResetAfter: c.decision.ResetAfter,
			Denied:     !c.decision.Allowed,
			RetryAfter: c.decision.RetryAfter,
		})
	}
	if degraded {
		over := resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT
		fs = ratelimitheader.AppendDegraded(fs, over && !retryAfter, DegradedRetryAfter)
	}
	if len(fs) == 0 {
		return
	}
	// One allocation for all the header messages.
	vals := make([]corev3.HeaderValue, len(fs))
	hs := make([]*corev3.HeaderValue, len(fs))
	for i, f := range fs {
		vals[i].Key, vals[i].Value = f.LowerName(), f.Value
		hs[i] = &vals[i]
	}
	resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, hs...)
}

// headerLimit is l as a quota policy for the headers (see
// internal/ratelimitheader for how a token bucket maps to q and w).
func headerLimit(l *config.Limit) ratelimitheader.Limit {
	switch {
	case l.DenyAll:
		return ratelimitheader.DenyAll(l.Name, l.Rate.Period)
	case l.Rate.Algorithm == algorithms.TokenBucket:
		return ratelimitheader.TokenBucket(l.Name, l.Rate.Requests, l.Rate.Period, l.Rate.Burst)
	}
	return ratelimitheader.Window(l.Name, l.Rate.Requests, l.Rate.Period)
}

// moreRestrictive orders checks for the headers and per-descriptor status:
// an enforced deny beats an allow, a longer wait beats a shorter one, fewer
// remaining beats more.
func moreRestrictive(a, b *envoyCheck) bool {
	ad, bd := !a.decision.Allowed && !a.shadow, !b.decision.Allowed && !b.shadow
	switch {
	case ad != bd:
		return ad
	case ad && waitOf(a) != waitOf(b):
		return waitOf(a) > waitOf(b)
	}
	return a.decision.Remaining < b.decision.Remaining
}

// waitOf is a deny's wait, with never as the longest.
func waitOf(c *envoyCheck) time.Duration {
	if c.decision.RetryAfter < 0 {
		return 1<<63 - 1
	}
	return c.decision.RetryAfter
}

// currentLimit describes l in Envoy's terms: requests per unit, with a
// unit multiplier when the period is a multiple of a unit.
func currentLimit(l *config.Limit) *rlsv3.RateLimitResponse_RateLimit {
	rl := &rlsv3.RateLimitResponse_RateLimit{Name: l.Name, RequestsPerUnit: uint32(min(max(l.Rate.Capacity(), 0), 1<<32-1))}
	if l.DenyAll {
		rl.RequestsPerUnit = 0
	}
	p := l.Rate.Period
	for _, u := range []rlsv3.RateLimitResponse_RateLimit_Unit{
		rlsv3.RateLimitResponse_RateLimit_YEAR, rlsv3.RateLimitResponse_RateLimit_MONTH, rlsv3.RateLimitResponse_RateLimit_WEEK,
		rlsv3.RateLimitResponse_RateLimit_DAY, rlsv3.RateLimitResponse_RateLimit_HOUR, rlsv3.RateLimitResponse_RateLimit_MINUTE,
		rlsv3.RateLimitResponse_RateLimit_SECOND,
	} {
		ud := unitDurations[u]
		if p > 0 && p%ud == 0 {
			rl.Unit = u
			if m := p / ud; m != 1 {
				rl.UnitMultiplier = wrapperspb.UInt32(uint32(min(m, 1<<32-1)))
			}
			return rl
		}
	}
	return rl
}
