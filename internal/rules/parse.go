package rules

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/zones"
)

// fileConfig is one parsed file, before it is merged with the others.
type fileConfig struct {
	name      string
	domain    string
	hasDomain bool
	domainPos pos
	root      *node
	limits    []*Limit
	policies  []policyAt
	quota     *domainQuota // quota_buckets and quota_unmatched (quota.go)
	// With Options.MergeDomains, named holds the file's explicit limit
	// names and unresolved the replaces entries naming none of them: the
	// other files of the domain may define them (see mergeFile).
	named      map[string]bool
	unresolved []unresolvedRef
}

type policyAt struct {
	p   Policy
	pos pos
	src Source
}

// parser validates one file's documents (decoded by its decoder) and
// builds the file's limits, policies and quota buckets from them.
type parser struct {
	decoder
	domain     string
	defaultAlg algorithms.Algorithm
	// named holds the explicit limit names of the domain, and replaces
	// the replaces entries to check once all names are known.
	named    map[string]bool
	replaces []replaceRef
	origin   *origin // the file, shared by every srcRef of its rules
	// zones resolves each time_zone name of the file once, however many
	// rules name it (and rules of one zone share its *time.Location).
	zones zones.Cache
	// merge defers the replaces entries naming no limit of the file to
	// the domain's merge (Options.MergeDomains).
	merge bool
}

type replaceRef struct {
	name string
	at   *yaml.Node
}

// parseFile parses and validates one file. Its errors come in file order.
func parseFile(s source, o Options) (*fileConfig, ErrorList) {
	p := &parser{decoder: decoder{file: s.name, active: map[*yaml.Node]bool{}}, named: map[string]bool{},
		origin: &origin{file: s.name, xdsResource: s.resource, version: s.version}, merge: o.MergeDomains}
	fc := p.parse(s.data)
	if len(p.errs) > 0 {
		p.errs.sortByPosition()
		return nil, p.errs
	}
	return fc, nil
}

func (p *parser) parse(data []byte) *fileConfig {
	root := p.document(data)
	if root == nil {
		return nil
	}
	f, at, ok := p.fields(root, "the file", "domain", "descriptors", "default_algorithm", "policies", "quota_buckets", "quota_unmatched")
	if !ok {
		return nil
	}
	domain, unmatched := p.str(f["domain"]), p.str(f["quota_unmatched"])
	descriptors, policies, buckets := f["descriptors"], f["policies"], f["quota_buckets"]
	fc := &fileConfig{name: p.file}
	if v := p.str(f["default_algorithm"]); v.ok {
		a, err := algorithms.ParseAlgorithm(v.v)
		if err != nil {
			p.errorf(v.at, "default_algorithm: %v", err)
		}
		p.defaultAlg = a
	}
	if v := domain; v.given() {
		fc.domainPos = posOf(v.at)
		if v.ok {
			if v.v == "" {
				p.errorf(v.at, "empty domain")
			}
			fc.domain, fc.hasDomain = v.v, true
		}
	}
	if policies != nil {
		fc.policies = p.policies(policies)
	}
	switch {
	case !domain.given() && policies == nil:
		p.errorf(at, "missing domain: each file names one domain (or holds only policies)")
	case !domain.given() && descriptors != nil:
		p.errorf(descriptors, "descriptors without a domain: add a domain key")
	case !domain.given() && (buckets != nil || unmatched.given()):
		p.errorf(at, "quota_buckets and quota_unmatched need a domain: add a domain key")
	}
	p.domain = fc.domain
	fc.root = &node{}
	if descriptors != nil && fc.hasDomain {
		p.descriptors(fc.root, descriptors, nil, fc.domain, 1)
	}
	if fc.hasDomain {
		// Quota buckets belong to a domain: without one they are an
		// error of their own (above), not read.
		fc.quota = p.quota(fc.domain, buckets, unmatched)
	}
	for _, r := range p.replaces {
		if p.named[r.name] {
			continue
		}
		if p.merge {
			at := posOf(r.at)
			fc.unresolved = append(fc.unresolved, unresolvedRef{domain: fc.domain, name: r.name,
				err: &Error{File: p.file, Line: at.line, Column: at.col, Msg: unresolvedReplaces(r.name, fc.domain)}})
			continue
		}
		p.errorf(r.at, "%s", unresolvedReplaces(r.name, fc.domain))
	}
	if len(p.errs) > 0 {
		return nil
	}
	fc.named = p.named
	fc.limits = collectLimits(fc.root, nil)
	return fc
}

func collectLimits(n *node, out []*Limit) []*Limit {
	out = append(out, n.limits...)
	for _, c := range n.children() {
		out = collectLimits(c, out)
	}
	return out
}

// unresolvedReplaces is the error of a replaces entry naming no limit of
// its domain.
func unresolvedReplaces(name, domain string) string {
	return fmt.Sprintf("replaces names %q, but no limit in domain %q has that name", name, domain)
}
