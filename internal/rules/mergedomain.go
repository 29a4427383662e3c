package rules

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// This file holds Options.MergeDomains: a domain written in several files,
// as envoyproxy/ratelimit loads it with MERGE_DOMAIN_CONFIG=true. Each
// later file adds its top-level descriptors to the domain's tree; one
// whose key and value the tree already holds is a conflict, whatever is
// nested below either (the reference refuses it as a "duplicate
// descriptor composite key": trees are not merged deeper than the top).

// mergeFile adds the top-level descriptors of fc, a later file of a domain
// c already holds, to c's tree of that domain (built by this load, so not
// shared yet), and its quota_buckets when the domain has none. It returns
// one error per conflict; the other descriptors are added.
func mergeFile(c *Set, fc *fileConfig) ErrorList {
	dst, src := c.domains[fc.domain], fc.root
	var errs ErrorList
	conflict := func(n *node, what string, first *node) {
		at := n.src.source()
		errs = append(errs, &Error{File: at.File, Line: at.Line, Column: at.Column, Msg: fmt.Sprintf(
			"duplicate descriptor: %s is already defined for domain %q at %s (merged files add top-level descriptors; they are not merged below them)",
			what, fc.domain, first.src.source())})
	}
	refused := map[*node]bool{}
	for _, k := range slices.SortedFunc(maps.Keys(src.exact), cmpKV) {
		n := src.exact[k]
		if first := dst.exact[k]; first != nil {
			conflict(n, fmt.Sprintf("key %q with value %q", k.k, k.v), first)
			refused[n] = true
			continue
		}
		if dst.exact == nil {
			dst.exact = map[kv]*node{}
		}
		dst.exact[k] = n
	}
	for _, key := range slices.Sorted(maps.Keys(src.wild)) {
		for _, w := range src.wild[key] {
			if refused[w.n] {
				continue
			}
			if dst.wild == nil {
				dst.wild = map[string][]wildKV{}
			}
			dst.wild[key] = append(dst.wild[key], w) // after the earlier files' wildcards
		}
	}
	for _, key := range slices.Sorted(maps.Keys(src.keyOnly)) {
		n := src.keyOnly[key]
		if first := dst.keyOnly[key]; first != nil {
			conflict(n, fmt.Sprintf("key %q", key), first)
			continue
		}
		if dst.keyOnly == nil {
			dst.keyOnly = map[string]*node{}
		}
		dst.keyOnly[key] = n
	}
	for _, key := range slices.Sorted(maps.Keys(src.cidr)) {
		mergeCIDR(dst, key, src.cidr[key], func(n, first *node, p netip.Prefix) {
			conflict(n, fmt.Sprintf("key %q with match: cidr %s", key, p), first)
		})
	}
	if q := fc.quota; q != nil && q.given {
		if have := c.quota[fc.domain]; have != nil && have.given {
			errs = append(errs, &Error{File: fc.name, Line: fc.domainPos.line, Column: fc.domainPos.col, Msg: fmt.Sprintf(
				"quota_buckets or quota_unmatched of domain %q are already given in another file: keep them in one file of the domain", fc.domain)})
		} else {
			c.quota[fc.domain] = q
		}
	}
	slices.SortStableFunc(errs, func(a, b *Error) int { return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column)) })
	return errs
}

// mergeCIDR adds the networks of src, the `match: cidr` children of key
// in a later file, to dst's table of that key; a network dst already has
// is reported through conflict and not added.
func mergeCIDR(dst *node, key string, src *cidrTable, conflict func(n, first *node, p netip.Prefix)) {
	if dst.cidr == nil {
		dst.cidr = map[string]*cidrTable{}
	}
	t := dst.cidr[key]
	if t == nil {
		t = &cidrTable{}
		dst.cidr[key] = t
	}
	have := map[netip.Prefix]*node{}
	for _, n := range t.nodes(nil) {
		have[netip.MustParsePrefix(n.value).Masked()] = n // checked when its file was read
	}
	for _, n := range src.nodes(nil) {
		p := netip.MustParsePrefix(n.value).Masked()
		if first := have[p]; first != nil {
			conflict(n, first, p)
			continue
		}
		t.add(p, n)
	}
}

// stillUnresolved returns the errors of the replaces entries, deferred to
// their domain by Options.MergeDomains, that name no limit of any file of
// the domain. named holds each domain's explicit limit names.
func stillUnresolved(unresolved []unresolvedRef, named map[string]map[string]bool) ErrorList {
	var errs ErrorList
	for _, u := range unresolved {
		if !named[u.domain][u.name] {
			errs = append(errs, u.err)
		}
	}
	return errs
}

// unresolvedRef is a replaces entry naming no limit of its own file, left
// for the other files of its domain (Options.MergeDomains).
type unresolvedRef struct {
	domain, name string
	err          *Error
}

func cmpKV(a, b kv) int {
	return cmp.Or(strings.Compare(a.k, b.k), strings.Compare(a.v, b.v))
}
