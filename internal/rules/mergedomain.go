package rules

import "fmt"

// This file holds Options.MergeDomains: a domain written in several files,
// as envoyproxy/ratelimit loads it with MERGE_DOMAIN_CONFIG=true. Each
// later file adds its top-level descriptors to the domain's tree; one
// whose key and value the tree already holds is a conflict, whatever is
// nested below either (the reference refuses it as a "duplicate
// descriptor composite key": trees are not merged deeper than the top).

// mergeFile adds the top-level descriptors of fc, a later file of a domain
// c already holds, to c's tree of that domain (built by this load, so not
// shared yet), and its quota_buckets when the domain has none. It returns
// one error per conflict, in file order; the other descriptors are added.
func mergeFile(c *Set, fc *fileConfig) ErrorList {
	dst := c.domains[fc.domain]
	var errs ErrorList
	for _, n := range sortedChildren(fc.root) {
		first := dst.sibling(n)
		if first == nil {
			dst.add(n)
			continue
		}
		at := n.src.source()
		errs = append(errs, &Error{File: at.File, Line: at.Line, Column: at.Column, Msg: fmt.Sprintf(
			"duplicate descriptor: %s is already defined for domain %q at %s (merged files add top-level descriptors; they are not merged below them)",
			siblingName(n), fc.domain, first.src.source())})
	}
	if q := fc.quota; q != nil && q.given {
		if have := c.quota[fc.domain]; have != nil && have.given {
			errs = append(errs, &Error{File: fc.name, Line: fc.domainPos.line, Column: fc.domainPos.col, Msg: fmt.Sprintf(
				"quota_buckets or quota_unmatched of domain %q are already given in another file: keep them in one file of the domain", fc.domain)})
		} else {
			c.quota[fc.domain] = q
		}
	}
	errs.sortByPosition()
	return errs
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
