package rules

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Merge combines configs loaded from different sources (the --config
// files, the resources of an xDS snapshot) into one, as if they had been
// loaded together: a domain or a policy defined by two of them is an
// ErrorList (wrapping ErrInvalid) naming both sources. Nil parts are
// skipped; merging no part gives nil (no rules). The parts are not
// modified, and the result shares their immutable rule trees.
func Merge(parts ...*Set) (*Set, error) {
	parts = slices.DeleteFunc(slices.Clone(parts), func(c *Set) bool { return c == nil })
	switch len(parts) {
	case 0:
		return nil, nil
	case 1:
		return parts[0], nil
	}
	c := &Set{domains: map[string]*node{}, policies: map[string]Policy{}, quota: map[string]*domainQuota{}, policyAt: map[string]Source{}}
	domainFrom := map[string]*Set{}
	policyFrom := map[string]*Set{}
	var errs ErrorList
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p.digest)))
		h.Write(n[:])
		h.Write([]byte(p.digest))
		c.files = append(c.files, p.files...)
		if p.loadedAt.After(c.loadedAt) {
			c.loadedAt = p.loadedAt // the newest part's: when this combination came to be
		}
		for _, d := range slices.Sorted(maps.Keys(p.domains)) {
			if first := domainFrom[d]; first != nil {
				errs = append(errs, &Error{File: sourceNames(p), Msg: fmt.Sprintf("duplicate domain %q: already defined by %s", d, sourceNames(first))})
				continue
			}
			domainFrom[d] = p
			c.domains[d] = p.domains[d]
			if q, ok := p.quota[d]; ok {
				c.quota[d] = q
			}
		}
		for _, name := range slices.Sorted(maps.Keys(p.policies)) {
			if first := policyFrom[name]; first != nil {
				errs = append(errs, &Error{File: sourceNames(p), Msg: fmt.Sprintf("duplicate policy %q: already defined by %s", name, sourceNames(first))})
				continue
			}
			policyFrom[name] = p
			c.policies[name] = p.policies[name]
			if at, ok := p.policyAt[name]; ok {
				c.policyAt[name] = at
			}
		}
		c.limits = append(c.limits, p.limits...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	slices.SortFunc(c.limits, func(a, b *Limit) int { return strings.Compare(a.ID, b.ID) })
	c.digest = hex.EncodeToString(h.Sum(nil))
	return c, nil
}

// sourceNames names a config's sources for an error message.
func sourceNames(c *Set) string {
	if len(c.files) == 0 {
		return "(no files)"
	}
	return strings.Join(c.files, ", ")
}
