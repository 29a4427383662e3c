package e2e

import typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

// The differential tables of quota mode (per rule, and the global
// QUOTA_MODE), of the response's dynamic metadata and of merged domains
// (MERGE_DOMAIN_CONFIG), each on rules and reference variables of its
// own. The expected answers were recorded from the reference on its own
// Redis (TestReferenceRecord with -diff.table meta, quota or merge).

// metaRules are quota-mode limits (key only: each value counts apart, so
// every sequence has counters of its own) and limits with metadata.
const metaRules = `domain: meta
descriptors:
  - key: svc
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
    metadata:
      service_with_quota:
        name: any
  - key: big
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
    metadata:
      service_with_quota:
        tier: big
      tags: [a, b]
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
    metadata:
      kind: user
      level: 2
  - key: plain
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
    metadata:
      free: true
  - key: ghost
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: tenant
    descriptors:
      - key: svc
        quota_mode: true
        rate_limit: {unit: hour, requests_per_unit: 1}
        metadata:
          nested: {deep: true}
`

// metaLeakWhy is why floodgate's metadata differs where the reference's
// has leaked: its merge writes one rule's metadata into another's (here
// big's tier into svc's, after a request passed both), so later answers
// carry keys of a rule they did not match.
const metaLeakWhy = "the merged metadata never modifies a rule's own: the reference's merge writes one rule's metadata into another's, which later answers then carry"

// metaEnv turns the dynamic metadata on (and the reference's headers).
var metaEnv = map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "RESPONSE_DYNAMIC_METADATA": "true"}

// metaCases: the answer rule of quota mode (OVER_LIMIT when a normal
// limit is over, or every quota-mode descriptor of the request is) and
// the dynamic metadata (domain, the request's descriptors, its
// hits_addend, and the merged metadata of the descriptors that passed).
var metaCases = []diffCase{
	{name: "quota alone", domain: "meta", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"svc=a1\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"name\":\"any\"}}}", d("svc", "a1")),
		step(1, "OVER | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"svc=a1\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", d("svc", "a1")),
	}},
	{name: "quota selection", domain: "meta", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"svc=b1\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"name\":\"any\"}}}", d("svc", "b1")),
		step(1, "OK | OVER 1/hour rem=0 | OK 2/hour rem=1 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"svc=b1\"]},{\"entries\":[\"big=b2\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"tier\":\"big\"},\"tags\":[\"a\",\"b\"]}}", d("svc", "b1"), d("big", "b2")),
		step(1, "OK | OVER 1/hour rem=0 | OK 2/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"svc=b1\"]},{\"entries\":[\"big=b2\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"tier\":\"big\"},\"tags\":[\"a\",\"b\"]}}", d("svc", "b1"), d("big", "b2")),
		step(1, "OVER | OVER 1/hour rem=0 | OVER 2/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"svc=b1\"]},{\"entries\":[\"big=b2\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", d("svc", "b1"), d("big", "b2")),
	}},
	{name: "quota beside a normal limit", domain: "meta", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 | OK 2/hour rem=1 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"svc=c1\"]},{\"entries\":[\"user=c2\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"kind\":\"user\",\"level\":2,\"service_with_quota\":{\"name\":\"any\"}}}", d("svc", "c1"), d("user", "c2")),
		step(1, "OVER | OVER 1/hour rem=0 | OK 2/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"svc=c1\"]},{\"entries\":[\"user=c2\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"kind\":\"user\",\"level\":2}}", d("svc", "c1"), d("user", "c2")),
		step(1, "OVER | OVER 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"user=c2\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", d("user", "c2")),
		step(1, "OVER | OVER 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"user=c2\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", d("user", "c2")),
	}},
	{name: "normal limit over, quota left", domain: "meta", steps: []diffStep{
		step(2, "OK | OK 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"user=c3\"]}],\"domain\":\"meta\",\"hitsAddend\":2,\"metadata\":{\"kind\":\"user\",\"level\":2}}", d("user", "c3")),
		step(1, "OVER | OVER 2/hour rem=0 | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"user=c3\"]},{\"entries\":[\"big=c4\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"tier\":\"big\"},\"tags\":[\"a\",\"b\"]}}", d("user", "c3"), d("big", "c4")),
		step(1, "OK | OK 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"big=c4\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"tier\":\"big\"},\"tags\":[\"a\",\"b\"]}}", d("big", "c4")),
	}},
	{name: "metadata of the passed descriptors", domain: "meta", steps: []diffStep{
		step(1, "OK | OK 2/hour rem=1 | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"user=d1\"]},{\"entries\":[\"plain=d2\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"kind\":\"user\",\"level\":2}}", d("user", "d1"), d("plain", "d2")),
		step(1, "OVER | OK 2/hour rem=0 | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"user=d1\"]},{\"entries\":[\"plain=d2\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"kind\":\"user\",\"level\":2}}", d("user", "d1"), d("plain", "d2")),
		step(1, "OK | OK 1/hour rem=0 | OK 2/hour rem=1 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"svc=d3\"]},{\"entries\":[\"big=d4\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"name\":\"any\",\"tier\":\"big\"},\"tags\":[\"a\",\"b\"]}}", d("svc", "d3"), d("big", "d4")),
	}},
	{name: "metadata hits_addend", domain: "meta", steps: []diffStep{
		step(2, "OK | OK 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"user=e1\"]}],\"domain\":\"meta\",\"hitsAddend\":2,\"metadata\":{\"kind\":\"user\",\"level\":2}}", d("user", "e1")),
		step(0, "OK | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"user=e2\"],\"hitsAddend\":1}],\"domain\":\"meta\",\"metadata\":{\"kind\":\"user\",\"level\":2}}", dHits(1, "user", "e2")),
		step(0, "OK | OK 2/hour rem=2 ; RateLimit-Limit=2 ; RateLimit-Remaining=2 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"user=e3\"],\"hitsAddend\":0}],\"domain\":\"meta\",\"metadata\":{\"kind\":\"user\",\"level\":2}}", dHits(0, "user", "e3")),
	}},
	{name: "metadata of unlimited", domain: "meta", steps: []diffStep{
		step(1, "OK | OK rem=4294967295 ; meta={\"descriptors\":[{\"entries\":[\"free=x\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", d("free", "x")),
		step(1, "OK | OK rem=4294967295 | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"free=x\"]},{\"entries\":[\"user=f1\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"kind\":\"user\",\"level\":2}}", d("free", "x"), d("user", "f1")),
	}},
	{name: "metadata with a limit override", domain: "meta", steps: []diffStep{
		step(1, "OK | OK 5/hour rem=4 ; RateLimit-Limit=5 ; RateLimit-Remaining=4 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"user=o1\"],\"limit\":\"requests_per_unit:5 unit:HOUR\"}],\"domain\":\"meta\",\"hitsAddend\":1}", dLimit(5, typev3.RateLimitUnit_HOUR, "user", "o1")),
	}},
	{name: "shadow quota", domain: "meta", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"ghost=g1\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", d("ghost", "g1")).
			but("OK | OK rem=0 ; meta={\"descriptors\":[{\"entries\":[\"ghost=g1\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", shadowWhy),
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"ghost=g1\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", d("ghost", "g1")).
			but("OK | OK rem=0 ; meta={\"descriptors\":[{\"entries\":[\"ghost=g1\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", shadowWhy),
		step(1, "OK | OK 1/hour rem=0 | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"ghost=g1\"]},{\"entries\":[\"svc=g2\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"name\":\"any\",\"tier\":\"big\"}}}", d("ghost", "g1"), d("svc", "g2")).
			but("OK | OK rem=0 | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"ghost=g1\"]},{\"entries\":[\"svc=g2\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"name\":\"any\"}}}", shadowWhy+"; "+metaLeakWhy),
		step(1, "OK | OK 1/hour rem=0 | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"ghost=g1\"]},{\"entries\":[\"svc=g2\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", d("ghost", "g1"), d("svc", "g2")).
			but("OK | OK rem=0 | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"ghost=g1\"]},{\"entries\":[\"svc=g2\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", shadowWhy),
	}},
	{name: "nested quota", domain: "meta", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"tenant=t\",\"svc=h1\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"nested\":{\"deep\":true}}}", d("tenant", "t", "svc", "h1")),
		step(1, "OVER | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"tenant=t\",\"svc=h1\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", d("tenant", "t", "svc", "h1")),
	}},
	{name: "no rule", domain: "meta", steps: []diffStep{
		step(1, "OK | OK rem=0 ; meta={\"descriptors\":[{\"entries\":[\"nosuch=x\"]}],\"domain\":\"meta\",\"hitsAddend\":1}", d("nosuch", "x")),
		step(1, "OK | OK rem=0 | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"nosuch=x\"]},{\"entries\":[\"svc=i1\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"name\":\"any\",\"tier\":\"big\"}}}", d("nosuch", "x"), d("svc", "i1")).
			but("OK | OK rem=0 | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"nosuch=x\"]},{\"entries\":[\"svc=i1\"]}],\"domain\":\"meta\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"name\":\"any\"}}}", metaLeakWhy),
	}},
}

// quotaRules are ordinary limits, made quotas by the global QUOTA_MODE.
const quotaRules = `domain: quota
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: tier
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: ban
    rate_limit: {unit: hour, requests_per_unit: 0}
`

// quotaEnv makes every limit a quota.
var quotaEnv = map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "QUOTA_MODE": "true"}

// quotaCases: with QUOTA_MODE every descriptor is a quota.
var quotaCases = []diffCase{
	{name: "every descriptor a quota", domain: "quota", steps: []diffStep{
		step(1, "OK | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("user", "q1")),
		step(1, "OK | OK 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "q1")),
		step(1, "OVER | OVER 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "q1")),
	}},
	{name: "one of two over", domain: "quota", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("tier", "q2")),
		step(1, "OK | OVER 1/hour rem=0 | OK 2/hour rem=1 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("tier", "q2"), d("user", "q3")),
		step(1, "OK | OVER 1/hour rem=0 | OK 2/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("tier", "q2"), d("user", "q3")),
		step(1, "OVER | OVER 1/hour rem=0 | OVER 2/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("tier", "q2"), d("user", "q3")),
	}},
	{name: "a ban is a quota too", domain: "quota", steps: []diffStep{
		step(1, "OVER | OVER 0/hour rem=0 ; RateLimit-Limit=0 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("ban", "x")),
		step(1, "OK | OVER 0/hour rem=0 | OK 2/hour rem=1 ; RateLimit-Limit=0 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("ban", "x"), d("user", "q4")),
	}},
	{name: "unlimited is no quota", domain: "quota", steps: []diffStep{
		step(1, "OK | OK rem=4294967295 | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("free", "x"), d("tier", "q5")),
		step(1, "OVER | OK rem=4294967295 | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("free", "x"), d("tier", "q5")),
	}},
	{name: "no rule is no quota", domain: "quota", steps: []diffStep{
		step(1, "OK | OK rem=0 | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("nosuch", "x"), d("tier", "q6")),
		step(1, "OK | OK rem=0 | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("nosuch", "x"), d("tier", "q6")),
	}},
}

// mergeFiles are one domain in two files, merged by MERGE_DOMAIN_CONFIG
// (each adds its top-level descriptors; a replaces names a limit of the
// other file; a wildcard of one key in each: the reference tries the
// files' wildcards in no fixed order, so these two match apart).
var mergeFiles = map[string]string{
	"a.yaml": `domain: merged
descriptors:
  - key: k1
    rate_limit: {unit: hour, requests_per_unit: 2, name: one}
  - key: p
    value: "ab*"
    rate_limit: {unit: hour, requests_per_unit: 1}
`,
	"b.yaml": `domain: merged
descriptors:
  - key: k2
    rate_limit: {unit: hour, requests_per_unit: 1, replaces: [{name: one}]}
  - key: p
    value: "x*"
    rate_limit: {unit: hour, requests_per_unit: 3}
`,
}

var mergeEnv = map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "MERGE_DOMAIN_CONFIG": "true"}

// mergeCases: both files' rules apply.
var mergeCases = []diffCase{
	{name: "the first file's", domain: "merged", steps: []diffStep{
		step(1, "OK | OK 2/hour \"one\" rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("k1", "x")),
		step(2, "OVER | OVER 2/hour \"one\" rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("k1", "x")),
	}},
	{name: "the second file's", domain: "merged", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("k2", "y")),
		step(1, "OVER | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("k2", "y")),
	}},
	{name: "replaces across files", domain: "merged", steps: []diffStep{
		step(1, "OK | OK rem=0 | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("k1", "z"), d("k2", "z")),
	}},
	{name: "wildcards of both files", domain: "merged", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("p", "abc")),
		step(1, "OVER | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("p", "abc")),
		step(1, "OK | OK 3/hour rem=2 ; RateLimit-Limit=3 ; RateLimit-Remaining=2 ; RateLimit-Reset=*", d("p", "xyz")),
	}},
}
