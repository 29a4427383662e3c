package rules

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
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
		hashField(h, []byte(p.digest))
		c.files = append(c.files, p.files...)
		if p.loadedAt.After(c.loadedAt) {
			c.loadedAt = p.loadedAt // the newest part's: when this combination came to be
		}
		domains, de := claim(domainFrom, p, "domain", slices.Sorted(maps.Keys(p.domains)))
		policies, pe := claim(policyFrom, p, "policy", slices.Sorted(maps.Keys(p.policies)))
		errs = append(append(errs, de...), pe...)
		adopt(c.domains, p.domains, domains)
		adopt(c.quota, p.quota, domains)
		adopt(c.policies, p.policies, policies)
		adopt(c.policyAt, p.policyAt, policies)
		c.limits = append(c.limits, p.limits...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	slices.SortFunc(c.limits, func(a, b *Limit) int { return strings.Compare(a.ID, b.ID) })
	c.digest = hex.EncodeToString(h.Sum(nil))
	return c, nil
}

// hashField writes b to h after its length, so that fields never run
// together.
func hashField(h hash.Hash, b []byte) {
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
	h.Write(b)
}

// sourceNames names a config's sources for an error message.
func sourceNames(c *Set) string {
	if len(c.files) == 0 {
		return "(no files)"
	}
	return strings.Join(c.files, ", ")
}

// claim gives part p the names (of a kind: domain, policy) no earlier
// part holds, recording p as their owner, and returns them; each name an
// earlier part holds is an error naming both sources.
func claim(owner map[string]*Set, p *Set, kind string, names []string) ([]string, ErrorList) {
	var errs ErrorList
	var got []string
	for _, name := range names {
		if first := owner[name]; first != nil {
			errs = append(errs, &Error{File: sourceNames(p), Msg: fmt.Sprintf("duplicate %s %q: already defined by %s", kind, name, sourceNames(first))})
			continue
		}
		owner[name] = p
		got = append(got, name)
	}
	return got, errs
}

// adopt copies the entries of src named by names into dst; a name src
// lacks is skipped.
func adopt[V any](dst, src map[string]V, names []string) {
	for _, name := range names {
		if v, ok := src[name]; ok {
			dst[name] = v
		}
	}
}
