package rules

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/internal/keys"
)

// descriptors reads a list of descriptors into parent's children. path is
// the chain of levels above; depth is 1 for the domain's list. It returns
// the number of limits read at or below the list.
func (p *parser) descriptors(parent *node, list *yaml.Node, path []level, prefix string, depth int) int {
	target := deref(list)
	if p.active[target] {
		p.errorf(list, "descriptors contain themselves through an alias")
		return 0
	}
	p.active[target] = true
	defer delete(p.active, target)
	items, ok := p.list(list, "descriptors")
	if !ok {
		return 0
	}
	if depth > maxDepth && len(items) > 0 {
		p.errorf(list, "descriptors nest deeper than %d levels", maxDepth)
		return 0
	}
	total := 0
	for _, item := range items {
		errsBefore := len(p.errs)
		dd, ok := p.descriptor(item)
		if !ok {
			continue
		}
		n, lv, ok := p.level(parent, &dd)
		if !ok {
			continue
		}
		here := append(append([]level(nil), path...), lv)
		name := prefix + "." + lv.key
		if lv.value != "" {
			name += "_" + lv.value
		}
		p.limits(n, &dd, here, name)
		p.chargeAfter(parent, n, &dd)
		below := len(n.limits)
		if dd.descriptors != nil {
			below += p.descriptors(n, dd.descriptors, here, name, depth+1)
		}
		// Flags that shape the counters or metrics of the limits at or
		// below this level do nothing without one: say so rather than
		// accept a file that does not do what it reads as.
		if below == 0 && len(p.errs) == errsBefore {
			if lv.valueToMetric {
				p.errorf(dd.valueToMetric.at, "value_to_metric has no effect: no rate_limit at or below this descriptor")
			}
			if lv.shared {
				p.errorf(dd.shareThreshold.at, "share_threshold has no effect: no rate_limit at or below this descriptor")
			}
		}
		total += below
		parent.add(n)
	}
	return total
}

// level checks a descriptor's key, value and flags: the key is unique
// among its siblings (those of parent so far), a `match: cidr` value is a
// network, share_threshold goes with a wildcard or cidr value. It returns
// the descriptor's node, without limits or children yet.
func (p *parser) level(parent *node, dd *descriptorDoc) (*node, level, bool) {
	switch {
	case !dd.key.given():
		p.errorf(dd.at, "descriptor has no key")
		return nil, level{}, false
	case !dd.key.ok:
		return nil, level{}, false
	case dd.key.v == "":
		p.errorf(dd.key.at, "descriptor has an empty key")
		return nil, level{}, false
	}
	key, value := dd.key.v, dd.value.v
	lv := level{key: key, value: value, wildcard: isWildcard(value), valueToMetric: isTrue(dd.valueToMetric)}
	if dd.match.given() {
		if !dd.match.ok {
			return nil, level{}, false
		}
		if dd.match.v != matchCIDR {
			p.errorf(dd.match.at, "unknown match %q (want cidr; leave match out for an exact or wildcard value)", dd.match.v)
			return nil, level{}, false
		}
		prefix, err := parseCIDR(value)
		if err != nil {
			p.errorf(cmp.Or(dd.value.at, dd.match.at), "%v", err)
			return nil, level{}, false
		}
		lv.value, lv.wildcard, lv.cidr = prefix.String(), false, true
	}
	n := &node{key: key, value: value, network: lv.cidr, src: p.ref(posOf(dd.at))}
	if first := parent.sibling(n); first != nil {
		p.errorf(dd.at, "duplicate descriptor: %s is already defined at line %d, column %d", siblingName(n), first.src.line, first.src.col)
		return nil, level{}, false
	}
	if isTrue(dd.shareThreshold) {
		if !lv.wildcard && !lv.cidr {
			p.errorf(dd.shareThreshold.at, "share_threshold needs a wildcard value (one with a '*') or match: cidr; %q has neither", value)
		}
		lv.shared = lv.wildcard || lv.cidr
	}
	return n, lv, true
}

// add links child c under n.
func (n *node) add(c *node) {
	switch {
	case c.network:
		if n.cidr == nil {
			n.cidr = map[string]*cidrTable{}
		}
		t := n.cidr[c.key]
		if t == nil {
			t = &cidrTable{}
			n.cidr[c.key] = t
		}
		t.add(netip.MustParsePrefix(c.value), c) // level checked it
	case c.value == "":
		if n.keyOnly == nil {
			n.keyOnly = map[string]*node{}
		}
		n.keyOnly[c.key] = c
	default:
		if n.exact == nil {
			n.exact = map[kv]*node{}
		}
		n.exact[kv{c.key, c.value}] = c
		if isWildcard(c.value) {
			if n.wild == nil {
				n.wild = map[string][]wildKV{}
			}
			n.wild[c.key] = append(n.wild[c.key], wildKV{pat: compilePattern(c.value), n: c})
		}
	}
}

// sibling returns the child of n that c would duplicate, or nil: a
// network by its prefix (so 2001:db8::/32 and 2001:0db8::/32 are one),
// apart from an exact value of the same text.
func (n *node) sibling(c *node) *node {
	switch {
	case c.network:
		return n.cidr[c.key].find(netip.MustParsePrefix(c.value))
	case c.value == "":
		return n.keyOnly[c.key]
	}
	return n.exact[kv{c.key, c.value}]
}

// siblingName is c as the error about a duplicate names it (a network in
// canonical form).
func siblingName(c *node) string {
	switch {
	case c.network:
		return fmt.Sprintf("key %q with match: cidr %s", c.key, netip.MustParsePrefix(c.value))
	case c.value == "":
		return fmt.Sprintf("key %q", c.key)
	}
	return fmt.Sprintf("key %q with value %q", c.key, c.value)
}

// limits builds a descriptor's rate_limit or rate_limits into n.limits.
func (p *parser) limits(n *node, dd *descriptorDoc, path []level, name string) {
	if dd.rateLimitAt != nil && dd.rateLimitsAt != nil {
		p.errorf(dd.rateLimitsAt, "a descriptor takes rate_limit or rate_limits, not both")
		return
	}
	if dd.notAList {
		return
	}
	nodeShadow, detailed, nodeQuota := isTrue(dd.shadowMode), isTrue(dd.detailedMetric), isTrue(dd.quotaMode)
	meta := p.metadata(dd.metadata)
	if len(dd.rateLimits) == 0 {
		// As in the reference, these apply to this descriptor's limits only.
		own := func(v value[bool], key string) {
			if isTrue(v) {
				p.errorf(v.at, "%s applies to this descriptor's own rate_limit, and it has none (it does not reach nested descriptors)", key)
			}
		}
		own(dd.shadowMode, "shadow_mode")
		own(dd.detailedMetric, "detailed_metric")
		own(dd.quotaMode, "quota_mode")
		return
	}
	metricValues := slices.ContainsFunc(path, func(lv level) bool { return lv.valueToMetric })
	for i, rl := range dd.rateLimits {
		l := p.rateLimit(rl)
		if l == nil {
			continue
		}
		l.Domain = p.domain
		l.src = p.ref(posOf(rl.at))
		l.ShadowMode = l.ShadowMode || nodeShadow
		l.QuotaMode = l.QuotaMode || nodeQuota
		l.Metadata = meta
		l.DetailedMetric = detailed
		l.path = path
		l.metricValues = metricValues
		l.ID = limitID(p.domain, path, i)
		l.keyID = keys.LimitID(l.ID)
		if l.Name == "" {
			l.Name = name
			if len(dd.rateLimits) > 1 {
				l.Name += "#" + strconv.Itoa(i)
			}
		}
		n.limits = append(n.limits, l)
	}
	if len(n.limits) > 1 {
		for _, l := range n.limits {
			if l.Unlimited {
				p.errorf(dd.rateLimitsAt, "unlimited cannot be combined with other limits on one descriptor")
				break
			}
		}
	}
}
