package rules

import (
	"cmp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/keys"
)

// quota checks a domain's quota_buckets list (nil when absent) and
// quota_unmatched.
func (p *parser) quota(domain string, buckets *yaml.Node, unmatched value[string]) *domainQuota {
	dq := &domainQuota{unmatched: DefaultQuotaUnmatched, given: buckets != nil || unmatched.given()}
	if unmatched.ok {
		if a, ok := p.quotaAction(unmatched, "quota_unmatched", QuotaAllowAll, QuotaDenyAll, QuotaAbandon); ok {
			dq.unmatched = a
		}
	}
	items, _ := p.list(buckets, "quota_buckets")
	seen := map[string]*yaml.Node{}
	for _, it := range items {
		q, at := p.quotaBucket(it, domain)
		if q == nil {
			continue
		}
		if first := seen[q.ID]; first != nil {
			p.errorf(at, "duplicate quota bucket: the same bucket_id is already defined at line %d, column %d", first.Line, first.Column)
			continue
		}
		seen[q.ID] = at
		dq.buckets = append(dq.buckets, q)
	}
	return dq
}

// quotaBucket checks one quota_buckets entry and builds it, or returns
// nil; at is the entry's mapping.
func (p *parser) quotaBucket(n *yaml.Node, domain string) (q *QuotaBucket, at *yaml.Node) {
	f, at, ok := p.fields(n, "a quota bucket", "bucket_id", "rate_limit", "blanket_rule")
	if !ok {
		return nil, nil
	}
	errsBefore := len(p.errs)
	var ids []pair
	idAt := f["bucket_id"]
	if idAt != nil {
		// bucket_id: {} or nothing matches every bucket, least specific.
		ids, idAt, _ = p.pairs(idAt, true, "bucket_id must be a mapping of keys to values")
	}
	var rl *rateLimitDoc
	if f["rate_limit"] != nil {
		rl = p.decoder.rateLimit(f["rate_limit"])
	}
	blanket := p.str(f["blanket_rule"])
	switch {
	case f["bucket_id"] == nil:
		p.errorf(at, "quota bucket has no bucket_id (a mapping of keys to values, \"*\" for any value)")
		return nil, nil
	case idAt == nil:
		return nil, nil // not a mapping: reported
	}
	q = &QuotaBucket{Source: p.sourceAt(posOf(at))}
	for _, e := range ids {
		k, v := p.str(e.key), p.str(e.value)
		switch {
		case !k.ok || !v.ok:
			continue
		case k.v == "":
			p.errorf(k.at, "bucket_id has an empty key")
			continue
		case v.v == "":
			p.errorf(k.at, "bucket_id key %q has an empty value (use \"*\" for any value)", k.v)
			continue
		case v.v != "*" && strings.Contains(v.v, "*"):
			p.errorf(v.at, "bucket_id value %q: \"*\" stands alone (any value); partial wildcards are not supported here", v.v)
			continue
		}
		if slices.ContainsFunc(q.keys, func(x kv) bool { return x.k == k.v }) {
			p.errorf(k.at, "duplicate key %q in bucket_id", k.v)
			continue
		}
		q.keys = append(q.keys, kv{k.v, v.v})
		if v.v != "*" {
			q.exact++
		}
	}
	if len(q.keys) > maxQuotaKeys {
		p.errorf(idAt, "bucket_id has %d keys, more than %d", len(q.keys), maxQuotaKeys)
	}
	slices.SortFunc(q.keys, func(a, b kv) int { return strings.Compare(a.k, b.k) })

	switch {
	case f["rate_limit"] != nil && blanket.given():
		p.errorf(blanket.at, "a quota bucket takes rate_limit or blanket_rule, not both")
	case f["rate_limit"] == nil && !blanket.given():
		p.errorf(at, "a quota bucket needs rate_limit or blanket_rule (allow_all or deny_all)")
	case blanket.ok:
		if a, ok := p.quotaAction(blanket, "blanket_rule", QuotaAllowAll, QuotaDenyAll); ok {
			q.Action = a
		}
	case f["rate_limit"] != nil:
		if l := p.rateLimit(rl); l != nil {
			if len(l.Replaces) > 0 {
				p.errorf(rl.at, "replaces does not apply to a quota bucket (each reported bucket has one budget)")
			}
			if !l.Warn.IsZero() {
				p.errorf(rl.warnAt.at, "warn_at does not apply to a quota bucket (Envoy enforces its share itself and answers no warning)")
			}
			if l.Rate.Calendar != algorithms.NoCalendar {
				p.errorf(rl.period.at, "a calendar period does not apply to a quota bucket (Envoy enforces its share in fixed time units)")
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
		return nil, nil
	}
	q.ID = quotaID(domain, q.keys)
	q.Name = cmp.Or(q.Name, quotaName(domain, q.keys))
	if q.Limit != nil {
		q.Limit.src = p.ref(posOf(at))
		q.Limit.Name = q.Name
		q.Limit.ID = q.ID
		q.Limit.keyID = keys.LimitID(q.ID)
	}
	return q, at
}

// quotaAction reads the action v names (QuotaAction.String) among
// allowed; field is the YAML field, for the error when it names another.
func (p *parser) quotaAction(v value[string], field string, allowed ...QuotaAction) (QuotaAction, bool) {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if v.v == a.String() {
			return a, true
		}
		names[i] = a.String()
	}
	last := len(names) - 1
	p.errorf(v.at, "%s must be %s or %s, got %q", field, strings.Join(names[:last], ", "), names[last], v.v)
	return 0, false
}
