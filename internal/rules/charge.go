package rules

// `charge: after` on a descriptor marks the requests that end at it as
// usage known only afterwards: Envoy sends them when the stream is done
// (a rate limit action with apply_on_stream_done: true, the actual cost,
// e.g. an LLM call's tokens, in hits_addend) and does not read the answer.
// Such a descriptor has no rate_limit of its own: it charges its parent's
// limits, under the parent's counters (the request path's descriptor is
// the parent's entries; the stream-done one adds an entry, typically a
// generic_key, that lands on the charge: after node). The charge is debt
// (algorithms.Debt): admitted past the limit, so the request path is
// denied until the debt is repaid at the limit's rate. The server cannot
// tell a stream-done call from a request-path one (Envoy sends the same
// ShouldRateLimit), hence the marker in the config.

// chargeAfter reads dd's charge and, for "after", gives n the limits of
// parent, charged after the fact (Limit.ChargeAfter) under the parent's
// counters. Errors point at the charge key.
func (p *parser) chargeAfter(parent, n *node, dd *descriptorDoc) {
	v := dd.charge
	if !v.given() || !v.ok {
		return
	}
	switch v.v {
	case "before":
		return
	case "after":
	default:
		p.errorf(v.at, "charge must be before (the default: decided on the request path) or after (usage known afterwards, e.g. Envoy's apply_on_stream_done: charged as debt against the parent descriptor's limits, answered OK), got %q", v.v)
		return
	}
	if dd.rateLimitAt != nil || dd.rateLimitsAt != nil {
		p.errorf(v.at, "charge: after charges the parent descriptor's limits, so this descriptor takes no rate_limit of its own")
		return
	}
	for _, pl := range parent.limits {
		if pl.Unlimited || pl.DenyAll {
			continue // nothing to owe
		}
		c := *pl
		c.ChargeAfter = true
		c.ID = pl.ID + "/charge_after"
		c.Replaces = nil
		n.limits = append(n.limits, &c)
	}
	if len(n.limits) == 0 { // it has no rate_limit of its own (above)
		p.errorf(v.at, "charge: after needs a parent descriptor with a rate_limit to charge (not unlimited, requests_per_unit above 0)")
	}
}
