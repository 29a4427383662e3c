package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

const quotaYAML = `domain: api
quota_unmatched: deny_all
quota_buckets:
  - bucket_id: {}
    blanket_rule: allow_all
  - bucket_id: {name: free}
    rate_limit: {unit: minute, requests_per_unit: 100}
  - bucket_id: {name: free, api_key: "*"}
    rate_limit: {unit: second, requests_per_unit: 10, name: free_per_key}
  - bucket_id: {name: free, api_key: vip}
    rate_limit: {unlimited: true}
  - bucket_id: {name: "*", api_key: "*"}
    rate_limit: {period: 10s, requests_per_unit: 5, algorithm: token_bucket, burst: 8}
  - bucket_id: {name: banned}
    blanket_rule: deny_all
  - bucket_id: {name: zero}
    rate_limit: {unit: second, requests_per_unit: 0}
`

func TestMatchQuota(t *testing.T) {
	c := mustParse(t, quotaYAML)
	for _, tc := range []struct {
		id         map[string]string
		wantName   string
		wantAction QuotaAction
	}{
		{map[string]string{"name": "free"}, "api.quota.name_free", QuotaRateLimit},
		{map[string]string{"name": "free", "other": "x"}, "api.quota.name_free", QuotaRateLimit},
		{map[string]string{"name": "free", "api_key": "k1"}, "free_per_key", QuotaRateLimit},
		// exact beats "*" with as many keys
		{map[string]string{"name": "free", "api_key": "vip"}, "api.quota.api_key_vip.name_free", QuotaAllowAll},
		{map[string]string{"name": "paid", "api_key": "k1"}, "api.quota.api_key_*.name_*", QuotaRateLimit},
		{map[string]string{"name": "banned"}, "api.quota.name_banned", QuotaDenyAll},
		{map[string]string{"name": "zero"}, "api.quota.name_zero", QuotaDenyAll},
		// the empty bucket_id matches anything, least specific
		{map[string]string{"x": "y"}, "api.quota", QuotaAllowAll},
	} {
		q := c.MatchQuota("api", tc.id)
		if q == nil {
			t.Errorf("MatchQuota(%v) = nil, want %s", tc.id, tc.wantName)
			continue
		}
		if q.Name != tc.wantName || q.Action != tc.wantAction {
			t.Errorf("MatchQuota(%v) = %s %v, want %s %v", tc.id, q.Name, q.Action, tc.wantName, tc.wantAction)
		}
		if (q.Action == QuotaRateLimit) != (q.Limit != nil) {
			t.Errorf("MatchQuota(%v): action %v with Limit %v", tc.id, q.Action, q.Limit)
		}
	}
	q := c.MatchQuota("api", map[string]string{"name": "paid", "api_key": "k"})
	if want := (algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Period: 10 * time.Second, Burst: 8}); q.Limit.Rate != want {
		t.Errorf("rate = %+v, want %+v", q.Limit.Rate, want)
	}
	if got := c.QuotaUnmatched("api"); got != QuotaDenyAll {
		t.Errorf("QuotaUnmatched(api) = %v, want deny_all", got)
	}
	if got := c.QuotaUnmatched("nope"); got != DefaultQuotaUnmatched {
		t.Errorf("QuotaUnmatched(nope) = %v, want the default", got)
	}
	if q := c.MatchQuota("nope", map[string]string{"name": "free"}); q != nil {
		t.Errorf("MatchQuota in an unknown domain = %v, want nil", q)
	}
	// Without a catch-all, an unmatched id gets nil.
	c2 := mustParse(t, "domain: d\nquota_buckets:\n  - bucket_id: {a: '1'}\n    blanket_rule: deny_all\n")
	if q := c2.MatchQuota("d", map[string]string{"a": "2"}); q != nil {
		t.Errorf("MatchQuota(a=2) = %v, want nil", q.Name)
	}
	if got := c2.QuotaUnmatched("d"); got != QuotaAllowAll {
		t.Errorf("QuotaUnmatched without quota_unmatched = %v, want allow_all", got)
	}
}

// TestQuotaIDStable: an entry's ID survives a change of its rate (demand
// carries over a reload) and differs between bucket_ids.
func TestQuotaIDStable(t *testing.T) {
	a := mustParse(t, "domain: d\nquota_buckets:\n  - bucket_id: {a: '1', b: '*'}\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	b := mustParse(t, "domain: d\nquota_buckets:\n  - bucket_id: {b: '*', a: '1'}\n    rate_limit: {unit: minute, requests_per_unit: 7}\n")
	id := map[string]string{"a": "1", "b": "x"}
	qa, qb := a.MatchQuota("d", id), b.MatchQuota("d", id)
	if qa.ID != qb.ID {
		t.Errorf("IDs differ across a rate change: %s vs %s", qa.ID, qb.ID)
	}
	if qa.Limit.Rate.Requests != 1 || qb.Limit.Rate.Requests != 7 {
		t.Errorf("rates %d, %d", qa.Limit.Rate.Requests, qb.Limit.Rate.Requests)
	}
}

func TestQuotaInvalid(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"domain: d\nquota_buckets:\n  - rate_limit: {unit: second, requests_per_unit: 1}\n", "test.yaml:3:5: quota bucket has no bucket_id"},
		{"domain: d\nquota_buckets:\n  - bucket_id: {a: '1'}\n", "test.yaml:3:5: a quota bucket needs rate_limit or blanket_rule"},
		{"domain: d\nquota_buckets:\n  - bucket_id: {a: '1'}\n    blanket_rule: maybe\n", "test.yaml:4:19: blanket_rule must be allow_all or deny_all"},
		{"domain: d\nquota_buckets:\n  - bucket_id: {a: '1'}\n    blanket_rule: deny_all\n    rate_limit: {unit: second, requests_per_unit: 1}\n", "a quota bucket takes rate_limit or blanket_rule, not both"},
		{"domain: d\nquota_buckets:\n  - bucket_id: {a: ''}\n    blanket_rule: deny_all\n", "test.yaml:3:17: bucket_id key \"a\" has an empty value"},
		{"domain: d\nquota_buckets:\n  - bucket_id: {a: 'x*'}\n    blanket_rule: deny_all\n", "partial wildcards are not supported"},
		{"domain: d\nquota_buckets:\n  - bucket_id: [a]\n    blanket_rule: deny_all\n", "bucket_id must be a mapping"},
		{"domain: d\nquota_buckets:\n  - bucket_id: {a: '1'}\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "invalid rate limit unit"},
		{"domain: d\nquota_buckets:\n  - bucket_id: {a: '1'}\n    blanket_rule: deny_all\n  - bucket_id: {a: '1'}\n    blanket_rule: allow_all\n", "test.yaml:5:5: duplicate quota bucket"},
		{"domain: d\nquota_unmatched: sometimes\n", "test.yaml:2:18: quota_unmatched must be allow_all, deny_all or abandon"},
		{"quota_buckets: []\npolicies: {p: {requests_per_second: 1}}\n", "quota_buckets and quota_unmatched need a domain"},
		{"domain: d\nquota_buckets:\n  - bucket_id: {a: '1'}\n    rate_limit: {unit: second, requests_per_unit: 1, name: x, replaces: [{name: x2}]}\n  - bucket_id: {a: '2'}\n    rate_limit: {unit: second, requests_per_unit: 1, name: x2}\n", "replaces does not apply to a quota bucket"},
	} {
		_, err := Parse("test.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}
