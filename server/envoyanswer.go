package server

import (
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/localshare"
	"github.com/floodgate/floodgate/internal/ratelimitheader"
)

// maxHeaderFields bounds the header fields of one answer: the six of
// ratelimitheader.Policy.Append, X-RateLimit-Degraded and
// RateLimit-Warning.
const maxHeaderFields = 8

// responseBlock is a response with room for the pointers to its headers
// and to the statuses of a small request, allocated as one block. (The
// header values themselves are allocated apart, as many as there are:
// a block above 512 bytes costs more to allocate and scan than two
// below.)
type responseBlock struct {
	resp     rlsv3.RateLimitResponse
	statuses [envoyInline]*rlsv3.RateLimitResponse_DescriptorStatus
	hdrPtrs  [maxHeaderFields]*corev3.HeaderValue
}

// statusBlock is one descriptor status with the messages it points to,
// so that the statuses of a response are allocated as one slice.
type statusBlock struct {
	st    rlsv3.RateLimitResponse_DescriptorStatus
	limit rlsv3.RateLimitResponse_RateLimit
	mult  wrapperspb.UInt32Value
	reset durationpb.Duration
}

// newResponse returns an OK response with n OK statuses.
func newResponse(n int) (*responseBlock, []statusBlock) {
	b := &responseBlock{resp: rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}}
	sts := make([]statusBlock, n)
	b.resp.Statuses = fit(b.statuses[:], n)
	for i := range sts {
		sts[i].st.Code = rlsv3.RateLimitResponse_OK
		b.resp.Statuses[i] = &sts[i].st
	}
	return b, sts
}

// answer builds the response to n descriptors: the statuses, the overall
// code (w.over) and the headers.
//
// A descriptor's status is its most restrictive enforced limit. Shadow
// limits never shape a status's numbers or the headers (they show in the
// metrics): a descriptor with only shadow limits answers OK with no
// current_limit, so Envoy's own X-RateLimit-* headers skip it too. A limit
// the store could not decide (degraded) sets the code its failure mode
// gives, but no current_limit, limit_remaining or duration_until_reset:
// nothing is known about its quota, and a zero would tell the client "none
// left, retry now".
//
// The numbers are envoyproxy/ratelimit's: an unlimited descriptor has
// limit_remaining 4294967295; current_limit.name is the rule's name as
// configured ("" without one); an OVER_LIMIT status has limit_remaining
// 0; a window with nothing counted yet answers its remaining time as
// duration_until_reset; a 0-hit check reports what is left now.
func (e *Envoy) answer(checks []envoyCheck, n int, w *envoyWork) *rlsv3.RateLimitResponse {
	blk, sts := newResponse(n)
	resp := &blk.resp
	if w.over {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	var bestBuf [envoyInline]int
	best := fit(bestBuf[:], n)
	for i := range best {
		best[i] = -1
	}
	degraded := false
	for i := range checks {
		c := &checks[i]
		if c.peek && c.decision.Allowed {
			// The look at 1 hit counted it: give it back.
			c.decision.Remaining = min(c.decision.Remaining+1, c.decision.Limit)
		}
		// An algorithm that counts in windows (algorithms.Facts.Window, or
		// a calendar period) answers a key with nothing counted by the time
		// its window has left; the others have no window: such a key is
		// full now.
		if l := c.req.Limit; c.decision.ResetAfter == 0 && !c.fixed && !c.degraded && (l.Calendar != algorithms.NoCalendar || l.Algorithm.Facts().Window) {
			c.decision.ResetAfter = localshare.PeriodLeft(l, w.batch.now)
		}
		if c.limit.Unlimited && !c.shadow && best[c.desc] < 0 {
			sts[c.desc].st.LimitRemaining = 1<<32 - 1 // as the reference: nothing is counted
		}
		if c.limit.Unlimited || c.shadow {
			continue
		}
		degraded = degraded || c.degraded
		if b := best[c.desc]; b < 0 || ratelimitheader.MoreRestrictive(c.state(), checks[b].state()) {
			best[c.desc] = i
		}
	}
	headline := -1 // the check the headers describe
	for d, b := range best {
		if b < 0 {
			continue
		}
		sb := &sts[d]
		st := &sb.st
		c := &checks[b]
		st.LimitRemaining = 0
		if !c.decision.Allowed {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if c.degraded {
			continue
		}
		sb.limit.Name = c.limit.ConfiguredName()
		sb.limit.RequestsPerUnit = c.info.perUnit
		sb.limit.Unit = c.info.unit
		if c.info.mult != 0 {
			sb.mult.Value = c.info.mult
			sb.limit.UnitMultiplier = &sb.mult
		}
		st.CurrentLimit = &sb.limit
		if c.decision.Allowed {
			st.LimitRemaining = uint32(min(max(c.decision.Remaining, 0), 1<<32-1))
		}
		reset := c.decision.ResetAfter
		if c.limit.DenyAll {
			reset = ratelimitheader.NeverSeconds * time.Second
		}
		// As durationpb.New(reset).
		sb.reset.Seconds = int64(reset / time.Second)
		sb.reset.Nanos = int32(reset % time.Second)
		st.DurationUntilReset = &sb.reset
		if headline < 0 || ratelimitheader.MoreRestrictive(c.state(), checks[headline].state()) {
			headline = b
		}
	}
	if e.opts.NoHeaders {
		return resp
	}
	var buf [maxHeaderFields]ratelimitheader.Field
	fs := buf[:0]
	retryAfter := false
	if headline >= 0 {
		c := &checks[headline]
		retryAfter = !c.decision.Allowed
		fs = c.info.header.Append(fs, c.state())
	}
	if degraded {
		over := resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT
		fs = ratelimitheader.AppendDegraded(fs, over && !retryAfter, degradedRetryAfter)
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OK {
		fs = ratelimitheader.AppendWarning(fs, envoyWarnings(checks)...)
	}
	if len(fs) == 0 {
		return resp
	}
	resp.ResponseHeadersToAdd = headerValues(fs, blk.hdrPtrs[:])
	return resp
}

// headerValues are fs as Envoy's response_headers_to_add, the pointers
// in hs when they fit.
func headerValues(fs []ratelimitheader.Field, hs []*corev3.HeaderValue) []*corev3.HeaderValue {
	vals, hs := make([]corev3.HeaderValue, len(fs)), fit(hs, len(fs))
	for i, f := range fs {
		vals[i].Key, vals[i].Value = f.LowerName(), f.Value
		hs[i] = &vals[i]
	}
	return hs
}

// state is what the headers say of c's decision.
func (c *envoyCheck) state() ratelimitheader.State {
	return ratelimitheader.State{
		Remaining:  c.decision.Remaining,
		ResetAfter: c.decision.ResetAfter,
		Denied:     !c.decision.Allowed,
		RetryAfter: c.decision.RetryAfter,
	}
}

// envoyWarnings are the RateLimit-Warning members of the limits whose
// answers warn (see warned), in request order, each limit once. Shadow
// limits warn too: they show nowhere else in the answer, and a warning is
// how a limit being tried out tells its clients without refusing them.
func envoyWarnings(checks []envoyCheck) []string {
	var members []string
	for i := range checks {
		c := &checks[i]
		if c.fixed || !warned(c.decision.Allowed || c.shadow, c.decision, c.degraded, c.info.warnAt) {
			continue
		}
		if m := c.info.header.WarningMember(); !slices.Contains(members, m) {
			members = append(members, m)
		}
	}
	return members
}
