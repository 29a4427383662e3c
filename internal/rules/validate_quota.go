package rules

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/keys"
)

// quota checks a file's quota_buckets and quota_unmatched.
func (p *parser) quota(fd *fileDoc) *domainQuota {
	dq := &domainQuota{unmatched: DefaultQuotaUnmatched, given: fd.quotaBucketsAt != nil || fd.quotaUnmatched.given()}
	if v := fd.quotaUnmatched; v.ok {
		if a, ok := p.quotaAction(v, "quota_unmatched", QuotaAllowAll, QuotaDenyAll, QuotaAbandon); ok {
			dq.unmatched = a
		}
	}
	seen := map[string]*yaml.Node{}
	for _, qd := range fd.quotaBuckets {
		q := p.quotaBucket(qd, fd.domain.v)
		if q == nil {
			continue
		}
		if first := seen[q.ID]; first != nil {
			p.errorf(qd.at, "duplicate quota bucket: the same bucket_id is already defined at line %d, column %d", first.Line, first.Column)
			continue
		}
		seen[q.ID] = qd.at
		dq.buckets = append(dq.buckets, q)
	}
	return dq
}

// quotaBucket checks one quota_buckets entry and builds it, or returns
// nil.
func (p *parser) quotaBucket(qd *quotaBucketDoc, domain string) *QuotaBucket {
	switch {
	case !qd.hasBucketID:
		p.errorf(qd.at, "quota bucket has no bucket_id (a mapping of keys to values, \"*\" for any value)")
		return nil
	case qd.bucketIDAt == nil:
		return nil // not a mapping: reported
	}
	errsBefore := len(p.errs)
	q := &QuotaBucket{Domain: domain, Source: p.sourceAt(posOf(qd.at))}
	for _, bk := range qd.bucketID {
		k, v := bk.key, bk.value
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
		p.errorf(qd.bucketIDAt, "bucket_id has %d keys, more than %d", len(q.keys), maxQuotaKeys)
	}
	slices.SortFunc(q.keys, func(a, b kv) int { return strings.Compare(a.k, b.k) })

	blanket := qd.blanketRule
	switch {
	case qd.rateLimitAt != nil && blanket.given():
		p.errorf(blanket.at, "a quota bucket takes rate_limit or blanket_rule, not both")
	case qd.rateLimitAt == nil && !blanket.given():
		p.errorf(qd.at, "a quota bucket needs rate_limit or blanket_rule (allow_all or deny_all)")
	case blanket.ok:
		if a, ok := p.quotaAction(blanket, "blanket_rule", QuotaAllowAll, QuotaDenyAll); ok {
			q.Action = a
		}
	case qd.rateLimitAt != nil:
		if l := p.rateLimit(qd.rateLimit); l != nil {
			if len(l.Replaces) > 0 {
				p.errorf(qd.rateLimit.at, "replaces does not apply to a quota bucket (each reported bucket has one budget)")
			}
			if !l.Warn.IsZero() {
				p.errorf(qd.rateLimit.warnAt.at, "warn_at does not apply to a quota bucket (Envoy enforces its share itself and answers no warning)")
			}
			if l.Rate.Calendar != algorithms.NoCalendar {
				p.errorf(qd.rateLimit.period.at, "a calendar period does not apply to a quota bucket (Envoy enforces its share in fixed time units)")
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
	if qd.bad || len(p.errs) > errsBefore {
		return nil
	}
	q.ID = quotaID(domain, q.keys)
	if q.Name == "" {
		q.Name = quotaName(domain, q.keys)
	}
	if q.Limit != nil {
		q.Limit.src = p.ref(posOf(qd.at))
		q.Limit.Name = q.Name
		q.Limit.ID = q.ID
		q.Limit.keyID = keys.LimitID(q.ID)
	}
	return q
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
