package rules

import (
	"slices"
	"strconv"
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

// quotaActions are the actions' config spellings.
var quotaActions = [...]string{QuotaRateLimit: "rate_limit", QuotaAllowAll: "allow_all", QuotaDenyAll: "deny_all", QuotaAbandon: "abandon"}

// String returns the config spelling: rate_limit, allow_all, deny_all or
// abandon.
func (a QuotaAction) String() string {
	if a >= 0 && int(a) < len(quotaActions) {
		return quotaActions[a]
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
	// unique within the Set: the domain and the bucket_id, quoted and
	// sorted. Reloading an entry with a new rate keeps its ID (so the
	// demand already reported carries over).
	ID string
	// Action is what the entry assigns.
	Action QuotaAction
	// Limit is the rate_limit, for QuotaRateLimit; nil otherwise.
	// Limit.Unlimited and Limit.DenyAll are turned into QuotaAllowAll and
	// QuotaDenyAll when the file is read, so a QuotaRateLimit entry always
	// has a valid Limit.Rate.
	Limit *Limit
	// Source is where the entry was written.
	Source Source

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
	given     bool // the file wrote quota_buckets or quota_unmatched
}

// MatchQuota returns the quota_buckets entry of domain that governs a
// reported bucket id: of the entries whose keys the id all holds with the
// entry's values ("*" matching any value; keys the entry does not list are
// ignored), the most specific one (more keys matched, then more exact
// values, then the first in the file). It returns nil when none matches;
// QuotaUnmatched then says what the bucket gets.
func (c *Set) MatchQuota(domain string, id map[string]string) *QuotaBucket {
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
func (c *Set) QuotaUnmatched(domain string) QuotaAction {
	if c == nil || c.quota[domain] == nil {
		return DefaultQuotaUnmatched
	}
	return c.quota[domain].unmatched
}

// QuotaBuckets returns the quota_buckets entries of domain in file order.
func (c *Set) QuotaBuckets(domain string) []*QuotaBucket {
	if c == nil || c.quota[domain] == nil {
		return nil
	}
	return slices.Clone(c.quota[domain].buckets)
}

// quotaID is the QuotaBucket.ID: the domain and the sorted bucket_id,
// quoted.
func quotaID(domain string, keys []kv) string {
	id := strconv.Quote(domain) + "/quota"
	for _, k := range keys {
		id += "/" + strconv.Quote(k.k) + "=" + strconv.Quote(k.v)
	}
	return id
}

// quotaName is the default QuotaBucket.Name: "domain.quota.k1_v1.k2_v2".
func quotaName(domain string, keys []kv) string {
	name := domain + ".quota"
	for _, k := range keys {
		name += "." + k.k + "_" + k.v
	}
	return name
}
