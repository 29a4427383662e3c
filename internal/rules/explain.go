package rules

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// This file answers "why was this request limited?": which rule a
// descriptor matches, the store key it counts under, and, when it matches
// nothing, the nearest rules and why each did not match.

// maxCandidates bounds the candidates Explain lists per descriptor.
const maxCandidates = 5

// PathLevel is one descriptor on a rule's path, as configured.
type PathLevel struct {
	// Key and Value are the descriptor's; Value is "" for a key-only
	// descriptor (any value) and may hold '*' wildcards.
	Key, Value string
}

// Path returns the descriptors from the domain down to l, as configured.
func (l *Limit) Path() []PathLevel { return pathLevels(l.path) }

func pathLevels(path []level) []PathLevel {
	out := make([]PathLevel, len(path))
	for i, lv := range path {
		out[i] = PathLevel{Key: lv.key, Value: lv.value}
	}
	return out
}

// FormatPath writes a rule's path as "key=value/key2" (a key-only level
// without "=").
func FormatPath(path []PathLevel) string {
	var b strings.Builder
	for i, lv := range path {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(lv.Key)
		if lv.Value != "" {
			b.WriteByte('=')
			b.WriteString(lv.Value)
		}
	}
	return b.String()
}

// DescriptorExplanation is what one descriptor matches.
type DescriptorExplanation struct {
	// Entries is the descriptor.
	Entries []Entry
	// Matches are the limits Match returns for it, in config order; empty
	// when nothing matches.
	Matches []LimitMatch
	// Candidates are, when nothing matches, the rules nearest to the
	// descriptor (sharing at least its first key), nearest first, each
	// with why it did not match.
	Candidates []Candidate
}

// LimitMatch is one limit a descriptor matched.
type LimitMatch struct {
	// Limit is the matched limit.
	Limit *Limit
	// StoreKey is the key the Envoy API decides it under (Limit.AppendKey),
	// in the store's scope "". Empty when the store is not asked: Unlimited
	// (always OK) or DenyAll (always over the limit).
	StoreKey string
	// ReplacedBy names the limit of the same request whose replaces list
	// drops this one; "" when it applies.
	ReplacedBy string
}

// Candidate is a rule that did not match a descriptor.
type Candidate struct {
	// Path is the rule's descriptors from the domain down.
	Path []PathLevel
	// Source is where its deepest descriptor was written.
	Source Source
	// Limits are the rule's limits.
	Limits []*Limit
	// Reasons say why the descriptor did not reach it, e.g. `entry 1:
	// value "x" does not match "y"` or "descriptor has 1 entry, rule needs 2".
	Reasons []string

	matched, keys, depthGap int // for ranking: levels matched, keys matched, |depth difference|
}

// Explain says, for every descriptor of one request of domain, in order,
// which limits apply, the store key each counts under, and which are
// dropped by another matched limit's replaces (as MatchRequest does); for
// a descriptor that matches nothing in a domain the config has, the
// nearest rules and why each did not match.
func (c *Set) Explain(domain string, descriptors [][]Entry) []DescriptorExplanation {
	var out []DescriptorExplanation
	matched := c.MatchRequest(domain, descriptors)
	replacer := map[string]string{} // replaced name -> replacing limit's name
	for _, d := range descriptors {
		for _, l := range c.Match(domain, d) {
			for _, r := range l.Replaces {
				if _, ok := replacer[r]; !ok {
					replacer[r] = l.Name
				}
			}
		}
	}
	for i, d := range descriptors {
		de := DescriptorExplanation{Entries: slices.Clone(d)}
		for _, l := range c.Match(domain, d) {
			m := LimitMatch{Limit: l}
			if !slices.Contains(matched[i], l) {
				m.ReplacedBy = replacer[l.Name]
			}
			if !l.Unlimited && !l.DenyAll {
				m.StoreKey = string(l.AppendKey(nil, d))
			}
			de.Matches = append(de.Matches, m)
		}
		if len(de.Matches) == 0 && c.HasDomain(domain) {
			de.Candidates = c.candidates(domain, d)
		}
		out = append(out, de)
	}
	return out
}

// candidates ranks the domain's rules (nodes with limits) that share at
// least the first key with entries: most levels matched, then most keys
// matched, then nearest depth, then file order.
func (c *Set) candidates(domain string, entries []Entry) []Candidate {
	root := c.domains[domain]
	walk := walkPath(root, entries) // the nodes Match visits, level by level
	var out []Candidate
	var path []*node
	var visit func(n *node)
	visit = func(n *node) {
		if n != root {
			path = append(path, n)
			defer func() { path = path[:len(path)-1] }()
			if len(n.limits) > 0 {
				if cd, ok := candidateFor(path, entries, walk); ok {
					out = append(out, cd)
				}
			}
		}
		for _, k := range sortedChildren(n) {
			visit(k)
		}
	}
	visit(root)
	slices.SortStableFunc(out, func(a, b Candidate) int { // stable: the walk is in file order
		return cmp.Or(cmp.Compare(b.matched, a.matched), cmp.Compare(b.keys, a.keys),
			cmp.Compare(a.depthGap, b.depthGap))
	})
	return out[:min(len(out), maxCandidates)]
}

// sortedChildren lists n's children in file order.
func sortedChildren(n *node) []*node {
	kids := n.children()
	slices.SortFunc(kids, func(a, b *node) int {
		return cmp.Or(cmp.Compare(a.src.line, b.src.line), cmp.Compare(a.src.col, b.src.col)) // one domain is one file
	})
	return kids
}

// walkPath is the node Match reaches at each level of entries (nil from
// the first level it cannot go down).
func walkPath(root *node, entries []Entry) []*node {
	out := make([]*node, len(entries))
	n := root
	for i, e := range entries {
		if n = n.child(e); n == nil {
			break
		}
		out[i] = n
	}
	return out
}

// candidateFor compares the rule ending at path with entries; ok is false
// when not even the first key is shared.
func candidateFor(path []*node, entries []Entry, walk []*node) (Candidate, bool) {
	leaf := path[len(path)-1]
	cd := Candidate{Source: leaf.src.source(), Limits: leaf.limits, Path: pathLevels(leaf.limits[0].path)}
	cd.depthGap = max(len(path)-len(entries), len(entries)-len(path))
	for i, n := range path {
		if i >= len(entries) {
			break
		}
		e := entries[i]
		if e.Key != n.key {
			cd.Reasons = append(cd.Reasons, fmt.Sprintf("key %q expected at entry %d, got %q", n.key, i+1, e.Key))
			break
		}
		cd.keys++
		if !valueMatches(n, e.Value) {
			cd.Reasons = append(cd.Reasons, fmt.Sprintf("entry %d: value %q does not match %q", i+1, e.Value, n.value))
			break
		}
		if walk[i] != nil && walk[i] != n {
			cd.Reasons = append(cd.Reasons, fmt.Sprintf("entry %d: %s=%q goes to %s (at %v), which takes precedence over %s",
				i+1, e.Key, e.Value, describeNode(walk[i]), walk[i].src.source(), describeNode(n)))
			break
		}
		cd.matched++
	}
	if cd.keys == 0 {
		return Candidate{}, false
	}
	if len(cd.Reasons) == 0 {
		switch {
		case len(entries) < len(path):
			cd.Reasons = append(cd.Reasons, fmt.Sprintf("descriptor has %s, rule needs %d (add %s)",
				plural(len(entries), "entry", "entries"), len(path), describeNode(path[len(entries)])))
		case len(entries) > len(path):
			cd.Reasons = append(cd.Reasons, fmt.Sprintf("descriptor has %s, rule needs %d (a rule applies only at exactly its depth)",
				plural(len(entries), "entry", "entries"), len(path)))
		}
	}
	return cd, true
}

// valueMatches reports whether a request value reaches n by its own
// value: equal, a wildcard match, an address in a match: cidr network, or
// any value for a key-only descriptor.
func valueMatches(n *node, v string) bool {
	switch {
	case n.network:
		p, err := netip.ParsePrefix(n.value)
		a, ok := parseAddr(v)
		return err == nil && ok && p.Contains(a)
	case n.value == "" || n.value == v:
		return true
	case isWildcard(n.value):
		p := compilePattern(n.value)
		return p.match(v)
	}
	return false
}

// describeNode is a descriptor as the file writes it: key "k" with value "v".
func describeNode(n *node) string {
	if n.network {
		return fmt.Sprintf("key %q with an address in %s (match: cidr)", n.key, n.value)
	}
	if n.value == "" {
		return fmt.Sprintf("key %q with any value", n.key)
	}
	return fmt.Sprintf("key %q with value %q", n.key, n.value)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// QuotaExplanation is what ExplainQuota found for one reported bucket id.
type QuotaExplanation struct {
	// BucketID is the reported id.
	BucketID map[string]string
	// Bucket is the entry that governs the id (MatchQuota), or nil.
	Bucket *QuotaBucket
	// Action is what the id gets: Bucket.Action, or QuotaUnmatched.
	Action QuotaAction
	// Others are the other entries that match the id but lose to Bucket
	// (fewer keys, fewer exact values, or later in the file), and the
	// entries that do not match, each with its reasons; matching ones
	// first, then file order.
	Others []QuotaCandidate
}

// QuotaCandidate is a quota_buckets entry that does not govern an id.
type QuotaCandidate struct {
	Bucket *QuotaBucket
	// Matches is true for an entry that matches but is less specific.
	Matches bool
	// Reasons say why it does not govern the id.
	Reasons []string
}

// ExplainQuota says which quota_buckets entry of domain governs the
// reported bucket id (as MatchQuota decides), what the id gets, and why
// each other entry does not govern it.
func (c *Set) ExplainQuota(domain string, id map[string]string) QuotaExplanation {
	ex := QuotaExplanation{BucketID: id}
	ex.Bucket = c.MatchQuota(domain, id)
	ex.Action = c.QuotaUnmatched(domain)
	if ex.Bucket != nil {
		ex.Action = ex.Bucket.Action
	}
	var others []QuotaCandidate // the entries that do not match
	for _, q := range c.QuotaBuckets(domain) {
		if q == ex.Bucket {
			continue
		}
		qc := QuotaCandidate{Bucket: q}
		for _, k := range q.keys { // the reasons it does not match (q.matches)
			v, ok := id[k.k]
			switch {
			case !ok:
				qc.Reasons = append(qc.Reasons, fmt.Sprintf("bucket id has no key %q", k.k))
			case k.v != "*" && v != k.v:
				qc.Reasons = append(qc.Reasons, fmt.Sprintf("key %q: value %q does not match %q", k.k, v, k.v))
			}
		}
		if qc.Matches = len(qc.Reasons) == 0; qc.Matches {
			qc.Reasons = []string{lostTo(q, ex.Bucket)}
			ex.Others = append(ex.Others, qc)
		} else {
			others = append(others, qc)
		}
	}
	ex.Others = append(ex.Others, others...)
	return ex
}

// lostTo says why q, which matches an id, does not govern it: best does
// (see MatchQuota's order).
func lostTo(q, best *QuotaBucket) string {
	switch {
	case len(best.keys) != len(q.keys):
		return fmt.Sprintf("matches, but %s is more specific: %s to this one's %d", best.Name,
			plural(len(best.keys), "key", "keys"), len(q.keys))
	case best.exact != q.exact:
		return fmt.Sprintf("matches, but %s is more specific: %s to this one's %d", best.Name,
			plural(best.exact, "exact value", "exact values"), q.exact)
	}
	return fmt.Sprintf("matches as specifically as %s, which comes first in the file", best.Name)
}
