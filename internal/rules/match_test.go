package rules

import (
	"slices"
	"testing"
)

const matchConfig = `domain: m
descriptors:
  - key: path
    value: /api/users
    rate_limit: {unit: second, requests_per_unit: 1, name: exact}
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 2, name: api_wild}
  - key: path
    value: /api/u*
    rate_limit: {unit: second, requests_per_unit: 3, name: later_wild}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 4, name: any_path}
  - key: catchall
    rate_limit: {unit: second, requests_per_unit: 1, name: catchall_key}
  - key: catchall
    value: "*"
    descriptors:
      - key: never
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 5, name: acme_user}
      - key: user
        value: root
        rate_limit: {unit: minute, requests_per_unit: 0, name: acme_root}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 6, name: any_tenant}
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 7, name: any_tenant_user}
  - key: key_with_underscore
    rate_limit: {unit: second, requests_per_unit: 8, name: underscore_key}
  - key: key
    value: with_underscore
    rate_limit: {unit: second, requests_per_unit: 9, name: key_value}
  - key: empty
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 10, name: star}
  - key: internal
    rate_limit: {unlimited: true, name: unlimited}
  - key: plan
    value: free
    descriptors:
      - key: api_key
        rate_limits:
          - {name: free_per_second, algorithm: token_bucket, unit: second, requests_per_unit: 2, burst: 2}
          - {name: free_per_day, unit: day, requests_per_unit: 5}
`

func TestMatch(t *testing.T) {
	c := mustParse(t, matchConfig)
	tests := []struct {
		name    string
		domain  string
		entries []Entry
		want    string // the matched limit's name, "" for nil
	}{
		{"exact beats wildcard", "m", e("path", "/api/users"), "exact"},
		{"first wildcard wins", "m", e("path", "/api/users2"), "api_wild"},
		{"wildcard beats key-only", "m", e("path", "/api/x"), "api_wild"},
		{"wildcard needs the prefix", "m", e("path", "/api"), "any_path"},
		{"key-only catches the rest", "m", e("path", "/static"), "any_path"},
		{"a star wildcard shadows the key-only node", "m", e("catchall", "x"), ""},
		{"star wildcard matches the empty value", "m", e("empty", ""), "star"},
		{"star wildcard matches anything", "m", e("empty", "x"), "star"},
		{"nested key-only", "m", e("tenant", "acme", "user", "bob"), "acme_user"},
		{"nested exact", "m", e("tenant", "acme", "user", "root"), "acme_root"},
		{"no backtracking: exact parent, key-only child", "m", e("tenant", "acme"), ""},
		{"key-only parent", "m", e("tenant", "other"), "any_tenant"},
		{"key-only parent, nested", "m", e("tenant", "other", "user", "bob"), "any_tenant_user"},
		{"depth: deeper request", "m", e("path", "/api/users", "method", "GET"), ""},
		{"depth: wildcard node's child not requested", "m", e("tenant", "acme", "user", "bob", "x", "y"), ""},
		{"unknown key", "m", e("nope", "x"), ""},
		{"wrong key at level 2", "m", e("tenant", "acme", "group", "g"), ""},
		{"keys with underscores are not key_value", "m", e("key", "with_underscore"), "key_value"},
		{"underscore key alone", "m", e("key_with_underscore", "x"), "underscore_key"},
		{"underscore key: no cross-match", "m", e("key_with", "underscore"), ""},
		{"unlimited rule", "m", e("internal", "x"), "unlimited"},
		{"limit only at its depth", "m", e("plan", "free"), ""},
		{"unknown domain", "other", e("path", "/api/users"), ""},
		{"no entries", "m", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Match(tt.domain, tt.entries)
			if tt.want == "" {
				if got != nil {
					t.Fatalf("Match = %v, want nil", names(got))
				}
				return
			}
			if len(got) != 1 || got[0].Name != tt.want {
				t.Fatalf("Match = %v, want [%s]", names(got), tt.want)
			}
			if got := len(got[0].Path()); got != len(tt.entries) {
				t.Errorf("len(Path()) = %d, want %d", got, len(tt.entries))
			}
		})
	}
	if l := one(t, c, "m", e("tenant", "acme", "user", "root")...); !l.DenyAll || l.Rate.Requests != 0 {
		t.Errorf("requests_per_unit 0: DenyAll=%v Requests=%d", l.DenyAll, l.Rate.Requests)
	}
	if l := one(t, c, "m", e("internal", "x")...); !l.Unlimited || l.DenyAll {
		t.Errorf("unlimited: Unlimited=%v DenyAll=%v", l.Unlimited, l.DenyAll)
	}
	// A node with two limits gives both, in order (the API charges both and
	// answers with the tighter: e2e's TestEnvoyMatching).
	if got, want := names(c.Match("m", e("plan", "free", "api_key", "k1"))), []string{"free_per_second", "free_per_day"}; !slices.Equal(got, want) {
		t.Errorf("two limits: Match = %v, want %v", got, want)
	}
}

func names(ls []*Limit) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

func TestMatchRequestReplaces(t *testing.T) {
	c := mustLoad(t, "testdata/envoy")
	tests := []struct {
		name string
		req  [][]Entry
		want [][]string
	}{
		{
			"category replaces bkthomps",
			[][]Entry{e("source_cluster", "proxy", "destination_cluster", "bkthomps"), e("category", "account")},
			[][]string{nil, {"rl.category_account"}},
		},
		{
			"category replaces fake_name",
			[][]Entry{e("category", "account"), e("source_cluster", "proxy", "destination_cluster", "fake")},
			[][]string{{"rl.category_account"}, nil},
		},
		{
			"override replaces fake_name",
			[][]Entry{e("source_cluster", "proxy", "destination_cluster", "override"), e("source_cluster", "proxy", "destination_cluster", "fake")},
			[][]string{{"override"}, nil},
		},
		{
			"nothing to replace",
			[][]Entry{e("source_cluster", "proxy", "destination_cluster", "bkthomps"), e("foo", "x")},
			[][]string{{"bkthomps"}, {"rl.foo"}},
		},
		{
			"replacer alone",
			[][]Entry{e("category", "account"), e("nope", "x")},
			[][]string{{"rl.category_account"}, nil},
		},
		{"empty request", nil, [][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.MatchRequest("rl", tt.req)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d results, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !slices.Equal(names(got[i]), tt.want[i]) {
					t.Errorf("descriptor %d: %v, want %v", i, names(got[i]), tt.want[i])
				}
				if tt.want[i] == nil && got[i] != nil {
					t.Errorf("descriptor %d: %#v, want nil", i, got[i])
				}
			}
		})
	}
}

// TestMatchRequestKeepsShared checks that dropping a replaced limit from a
// multi-limit descriptor copies, never editing the shared slice.
func TestMatchRequestKeepsShared(t *testing.T) {
	c := mustParse(t, `domain: d
descriptors:
  - key: a
    rate_limits:
      - {unit: second, requests_per_unit: 1, name: first}
      - {unit: day, requests_per_unit: 100, name: quota}
      - {unit: hour, requests_per_unit: 10, name: last}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 5, replaces: [{name: quota}]}
`)
	got := c.MatchRequest("d", [][]Entry{e("a", "1"), e("b", "2")})
	if want := []string{"first", "last"}; !slices.Equal(names(got[0]), want) {
		t.Errorf("a: %v, want %v", names(got[0]), want)
	}
	if want := []string{"first", "quota", "last"}; !slices.Equal(names(c.Match("d", e("a", "1"))), want) {
		t.Errorf("the shared slice changed: %v", names(c.Match("d", e("a", "1"))))
	}
}

func TestShareThreshold(t *testing.T) {
	c := mustParse(t, `domain: d
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 10}
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 5}
  - key: docs
    value: docs/*
    rate_limit: {unit: second, requests_per_unit: 10}
`)
	key := func(entries ...Entry) string {
		ls := c.Match("d", entries)
		if len(ls) != 1 {
			t.Fatalf("Match(%v) = %d limits", entries, len(ls))
		}
		return string(ls[0].AppendKey(nil, entries))
	}
	if a, b := key(e("files", "files/a.pdf")...), key(e("files", "files/b.csv")...); a != b {
		t.Errorf("share_threshold: keys differ: %q %q", a, b)
	}
	if a, b := key(e("files", "files/a", "user", "u1")...), key(e("files", "files/b", "user", "u1")...); a != b {
		t.Errorf("share_threshold above: keys differ: %q %q", a, b)
	}
	if a, b := key(e("files", "files/a", "user", "u1")...), key(e("files", "files/a", "user", "u2")...); a == b {
		t.Errorf("different users share key %q", a)
	}
	if a, b := key(e("docs", "docs/a")...), key(e("docs", "docs/b")...); a == b {
		t.Errorf("without share_threshold, values share key %q", a)
	}
	l := one(t, c, "d", e("files", "files/a", "user", "u")...)
	if !l.Shared(0) || l.Shared(1) || l.Shared(2) || l.Shared(-1) {
		t.Errorf("Shared = %v %v", l.Shared(0), l.Shared(1))
	}
}

// TestAppendKeyUnambiguous pins weakness 3 of the reference: its cache key
// joins keys and values with '_', so a="1_b_2" and (a="1", b="2") collide.
func TestAppendKeyUnambiguous(t *testing.T) {
	c := mustParse(t, `domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
`)
	reqs := [][]Entry{
		e("a", "1_b_2"), e("a", "1", "b", "2"), e("a", "1|2:b"), e("a", "1", "b", "|2"),
		e("a", ""), e("a", "", "b", ""), e("a", "1:"), e("a", "1", "b", ""),
	}
	seen := map[string][]Entry{}
	for _, r := range reqs {
		l := one(t, c, "d", r...)
		k := string(l.AppendKey(nil, r))
		if prev, dup := seen[k]; dup {
			t.Errorf("%v and %v share key %q", prev, r, k)
		}
		seen[k] = r
	}
	l := one(t, c, "d", e("a", "x")...)
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() { buf = l.AppendKey(buf[:0], e("a", "x")) }); n > 1 {
		t.Errorf("AppendKey allocates %v times", n) // the one is e()
	}
}

func TestMetricName(t *testing.T) {
	c := mustLoad(t, "testdata/envoy")
	tests := []struct {
		domain  string
		entries []Entry
		want    string
	}{
		{"example5", e("azure", "tenant-1"), "example5.azure_tenant-1"}, // detailed_metric
		{"example5", e("path", "/bar/baz"), "example5.path_/bar/baz"},   // value_to_metric on a wildcard
		{"example5", e("path", "/foo/baz"), "example5.path_/foo/*"},     // plain: the rule's name
		{"edge_proxy_per_ip", e("remote_address", "1.2.3.4"), "edge_proxy_per_ip.remote_address"},
	}
	for _, tt := range tests {
		l := one(t, c, tt.domain, tt.entries...)
		if got := l.MetricName(tt.entries); got != tt.want {
			t.Errorf("MetricName(%v) = %q, want %q", tt.entries, got, tt.want)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	c := mustLoad(t, "testdata/envoy")
	reqs := [][]Entry{
		e("foo", "x", "bar", "bar", "baz", "shady"),
		e("path", "/bar/x"),
		e("remote_address", "10.1.2.3"),
		e("nope", "x"),
	}
	domains := []string{"rl", "example5", "edge_proxy_per_ip", "rl"}
	n := testing.AllocsPerRun(200, func() {
		for i, r := range reqs {
			c.Match(domains[i], r)
		}
	})
	if n != 0 {
		t.Errorf("Match allocates %v times per run, want 0", n)
	}
}
