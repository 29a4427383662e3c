package rules

import (
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// QuotaAction is what a quota bucket entry assigns.
type QuotaAction int

// The quota actions.
const (
	// QuotaRateLimit shares the entry's Limit among the instances that
	// report the bucket.
	QuotaRateLimit QuotaAction = iota
	// QuotaAllowAll lets every request of the bucket through.
	QuotaAllowAll
	// QuotaDenyAll denies every request of the bucket.
	QuotaDenyAll
	// QuotaAbandon tells the reporter the server does not govern the
	// bucket (an AbandonAction): Envoy then applies its own
	// no_assignment_behavior. Only an unmatched bucket gets it.
	QuotaAbandon
)

// String returns the config spelling: rate_limit, allow_all, deny_all or
// abandon.
func (a QuotaAction) String() string {
	switch a {
	case QuotaRateLimit:
		return "rate_limit"
	case QuotaAllowAll:
		return "allow_all"
	case QuotaDenyAll:
		return "deny_all"
	case QuotaAbandon:
		return "abandon"
	}
	return "quota_action(" + strconv.Itoa(int(a)) + ")"
}

// DefaultQuotaUnmatched is what a reported bucket that no quota_buckets
// entry matches gets, unless the domain's quota_unmatched says otherwise:
// allow_all, as ShouldRateLimit answers OK for a descriptor without a rule.
const DefaultQuotaUnmatched = QuotaAllowAll

// maxQuotaKeys bounds the keys of one quota bucket entry's bucket_id.
const maxQuotaKeys = 32

// QuotaBucket is one entry of a domain's quota_buckets list, for the Rate
// Limit Quota Service. QuotaBuckets returned by MatchQuota are shared and
// must not be modified.
type QuotaBucket struct {
	// Name is rate_limit.name, or "domain.quota.k1_v1.k2_v2" from the
	// entry's bucket_id keys, sorted. Bounded by the config, so safe as a
	// metric label.
	Name string
	// ID is stable across reloads of an entry with the same bucket_id and
	// unique within the Config: the domain and the bucket_id, quoted and
	// sorted. Reloading an entry with a new rate keeps its ID (so the
	// demand already reported carries over).
	ID string
	// Domain is the domain the entry belongs to.
	Domain string
	// Action is what the entry assigns.
	Action QuotaAction
	// Limit is the rate_limit, for QuotaRateLimit; nil otherwise.
	// Limit.Unlimited and Limit.DenyAll are turned into QuotaAllowAll and
	// QuotaDenyAll when the file is read, so a QuotaRateLimit entry always
	// has a valid Limit.Rate.
	Limit *Limit

	keys  []kv // the bucket_id, sorted by key; value "*" matches any value
	exact int  // keys whose value is not "*"
}

// Keys returns the entry's bucket_id as a new map ("*": any value).
func (q *QuotaBucket) Keys() map[string]string {
	out := make(map[string]string, len(q.keys))
	for _, k := range q.keys {
		out[k.k] = k.v
	}
	return out
}

// matches reports whether the reported bucket id holds every key of the
// entry with the entry's value ("*": any value).
func (q *QuotaBucket) matches(id map[string]string) bool {
	for _, k := range q.keys {
		v, ok := id[k.k]
		if !ok || (k.v != "*" && v != k.v) {
			return false
		}
	}
	return true
}

// moreSpecific reports whether q beats r: more keys, then more exact
// values. Equal entries keep file order (the caller keeps the first).
func (q *QuotaBucket) moreSpecific(r *QuotaBucket) bool {
	if len(q.keys) != len(r.keys) {
		return len(q.keys) > len(r.keys)
	}
	return q.exact > r.exact
}

// domainQuota is a domain's quota_buckets and quota_unmatched.
type domainQuota struct {
	buckets   []*QuotaBucket
	unmatched QuotaAction
}

// MatchQuota returns the quota_buckets entry of domain that governs a
// reported bucket id: of the entries whose keys the id all holds with the
// entry's values ("*" matching any value; keys the entry does not list are
// ignored), the most specific one (more keys matched, then more exact
// values, then the first in the file). It returns nil when none matches;
// QuotaUnmatched then says what the bucket gets.
func (c *Config) MatchQuota(domain string, id map[string]string) *QuotaBucket {
	if c == nil {
		return nil
	}
	dq := c.quota[domain]
	if dq == nil {
		return nil
	}
	var best *QuotaBucket
	for _, q := range dq.buckets {
		if q.matches(id) && (best == nil || q.moreSpecific(best)) {
			best = q
		}
	}
	return best
}

// QuotaUnmatched is what a bucket of domain that no entry matches gets:
// the domain's quota_unmatched, else DefaultQuotaUnmatched (also for a
// domain without a config file).
func (c *Config) QuotaUnmatched(domain string) QuotaAction {
	if c == nil || c.quota[domain] == nil {
		return DefaultQuotaUnmatched
	}
	return c.quota[domain].unmatched
}

// QuotaBuckets returns the quota_buckets entries of domain in file order.
func (c *Config) QuotaBuckets(domain string) []*QuotaBucket {
	if c == nil || c.quota[domain] == nil {
		return nil
	}
	return slices.Clone(c.quota[domain].buckets)
}

var quotaBucketKeys = []string{"bucket_id", "rate_limit", "blanket_rule"}

// quotaFields reads a file's quota_buckets and quota_unmatched into fc.
func (p *parser) quotaFields(fc *fileConfig, buckets, unmatched *yaml.Node) {
	dq := &domainQuota{unmatched: DefaultQuotaUnmatched}
	if unmatched != nil {
		if s, ok := p.str(unmatched); ok {
			switch s {
			case "allow_all":
				dq.unmatched = QuotaAllowAll
			case "deny_all":
				dq.unmatched = QuotaDenyAll
			case "abandon":
				dq.unmatched = QuotaAbandon
			default:
				p.errorf(unmatched, "quota_unmatched must be allow_all, deny_all or abandon, got %q", s)
			}
		}
	}
	if buckets != nil {
		items, ok := p.list(buckets, "quota_buckets")
		if ok {
			seen := map[string]*yaml.Node{}
			for _, it := range items {
				if q := p.quotaBucket(it, fc.domain); q != nil {
					if first := seen[q.ID]; first != nil {
						p.errorf(deref(it), "duplicate quota bucket: the same bucket_id is already defined at line %d, column %d", first.Line, first.Column)
						continue
					}
					seen[q.ID] = deref(it)
					dq.buckets = append(dq.buckets, q)
				}
			}
		}
	}
	fc.quota = dq
}

// quotaBucket reads one quota_buckets entry.
func (p *parser) quotaBucket(item *yaml.Node, domain string) *QuotaBucket {
	f, ok := p.fields(item, "a quota bucket", quotaBucketKeys...)
	if !ok {
		return nil
	}
	item = deref(item)
	errsBefore := len(p.errs)
	q := &QuotaBucket{Domain: domain}
	idNode := f["bucket_id"]
	if idNode == nil {
		p.errorf(item, "quota bucket has no bucket_id (a mapping of keys to values, \"*\" for any value)")
		return nil
	}
	if idNode = p.visit(idNode); idNode == nil {
		return nil
	}
	switch {
	case idNode.Kind == yaml.ScalarNode && idNode.Tag == "!!null":
		// bucket_id: {} or nothing: matches every bucket, least specific.
	case idNode.Kind != yaml.MappingNode:
		p.errorf(idNode, "bucket_id must be a mapping of keys to values, got %s", kindName(idNode))
		return nil
	}
	for i := 0; i+1 < len(idNode.Content); i += 2 {
		kn := p.visit(idNode.Content[i])
		if kn == nil {
			return nil
		}
		k, ok := p.str(kn)
		if !ok {
			continue
		}
		v, ok := p.str(idNode.Content[i+1])
		switch {
		case !ok:
			continue
		case k == "":
			p.errorf(kn, "bucket_id has an empty key")
			continue
		case v == "":
			p.errorf(kn, "bucket_id key %q has an empty value (use \"*\" for any value)", k)
			continue
		case v != "*" && strings.Contains(v, "*"):
			p.errorf(idNode.Content[i+1], "bucket_id value %q: \"*\" stands alone (any value); partial wildcards are not supported here", v)
			continue
		}
		if slices.ContainsFunc(q.keys, func(x kv) bool { return x.k == k }) {
			p.errorf(kn, "duplicate key %q in bucket_id", k)
			continue
		}
		q.keys = append(q.keys, kv{k, v})
		if v != "*" {
			q.exact++
		}
	}
	if len(q.keys) > maxQuotaKeys {
		p.errorf(idNode, "bucket_id has %d keys, more than %d", len(q.keys), maxQuotaKeys)
	}
	slices.SortFunc(q.keys, func(a, b kv) int { return strings.Compare(a.k, b.k) })

	rl, blanket := f["rate_limit"], f["blanket_rule"]
	switch {
	case rl != nil && blanket != nil:
		p.errorf(blanket, "a quota bucket takes rate_limit or blanket_rule, not both")
	case rl == nil && blanket == nil:
		p.errorf(item, "a quota bucket needs rate_limit or blanket_rule (allow_all or deny_all)")
	case blanket != nil:
		if s, ok := p.str(blanket); ok {
			switch s {
			case "allow_all":
				q.Action = QuotaAllowAll
			case "deny_all":
				q.Action = QuotaDenyAll
			default:
				p.errorf(blanket, "blanket_rule must be allow_all or deny_all, got %q", s)
			}
		}
	default:
		if l := p.rateLimit(rl); l != nil {
			if len(l.Replaces) > 0 {
				p.errorf(deref(rl), "replaces does not apply to a quota bucket (each reported bucket has one budget)")
			}
			switch {
			case l.Unlimited:
				q.Action = QuotaAllowAll
			case l.DenyAll:
				q.Action = QuotaDenyAll
			default:
				q.Action = QuotaRateLimit
				l.Domain = domain
				q.Limit = l
			}
			q.Name = l.Name
		}
	}
	if len(p.errs) > errsBefore {
		return nil
	}
	q.ID = quotaID(domain, q.keys)
	if q.Name == "" {
		q.Name = quotaName(domain, q.keys)
	}
	if q.Limit != nil {
		q.Limit.Name = q.Name
		q.Limit.ID = q.ID
		q.Limit.keyID = keyID(q.ID)
	}
	return q
}

// quotaID is the QuotaBucket.ID: the domain and the sorted bucket_id,
// quoted.
func quotaID(domain string, keys []kv) string {
	var b strings.Builder
	b.WriteString(strconv.Quote(domain))
	b.WriteString("/quota")
	for _, k := range keys {
		b.WriteByte('/')
		b.WriteString(strconv.Quote(k.k))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(k.v))
	}
	return b.String()
}

// quotaName is the default QuotaBucket.Name: "domain.quota.k1_v1.k2_v2".
func quotaName(domain string, keys []kv) string {
	var b strings.Builder
	b.WriteString(domain)
	b.WriteString(".quota")
	for _, k := range keys {
		b.WriteByte('.')
		b.WriteString(k.k)
		b.WriteByte('_')
		b.WriteString(k.v)
	}
	return b.String()
}
