package rules

import (
	"slices"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/keys"
)

// explainYAML's line numbers are asserted below: edit with care.
const explainYAML = `domain: shop
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 5, name: login_per_user, failure_mode: closed}
  - key: path
    value: /api/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: sliding_window}
  - key: path
    value: /api/health
    descriptors:
      - key: probe
        rate_limit: {unlimited: true}
  - key: banned
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: tier
    value: free
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: premium}]}
  - key: plan
    value: gold
    rate_limit: {unit: second, requests_per_unit: 50, name: premium}
  - key: file
    value: "*.pdf"
    rate_limit: {unit: second, requests_per_unit: 2}
`

func TestExplain(t *testing.T) {
	c := mustParse(t, explainYAML)
	for _, tc := range []struct {
		name    string
		entries []Entry
		// a match: the limit's name and source line, and whether it has a store key
		wantName   string
		wantLine   int
		wantNoKey  bool
		wantShadow bool
		// no match: the first candidate's path and a part of its first reason
		wantCand   string
		wantReason string
		wantCands  int
	}{
		{name: "key only", entries: []Entry{{"remote_address", "10.0.0.1"}}, wantName: "shop.remote_address", wantLine: 4},
		{name: "nested", entries: []Entry{{"path", "/login"}, {"user", "bob"}}, wantName: "login_per_user", wantLine: 9},
		{name: "wildcard", entries: []Entry{{"path", "/api/items"}}, wantName: "shop.path_/api/*", wantLine: 13},
		{name: "plain wildcard", entries: []Entry{{"file", "a.pdf"}}, wantName: "shop.file_*.pdf", wantLine: 30},
		{name: "wildcard mismatch", entries: []Entry{{"file", "a.txt"}},
			wantCand: "file=*.pdf", wantReason: `entry 1: value "a.txt" does not match "*.pdf"`, wantCands: 1},
		{name: "deny all", entries: []Entry{{"banned", "x"}}, wantName: "shop.banned", wantLine: 20, wantNoKey: true},
		{name: "unlimited", entries: []Entry{{"path", "/api/health"}, {"probe", "k8s"}}, wantName: "shop.path_/api/health.probe", wantLine: 18, wantNoKey: true},
		{name: "shadow", entries: []Entry{{"tier", "free"}}, wantName: "shop.tier_free", wantLine: 24, wantShadow: true},
		{name: "too short", entries: []Entry{{"path", "/login"}},
			wantCand: "path=/login/user", wantReason: "descriptor has 1 entry, rule needs 2", wantCands: 3},
		{name: "too long", entries: []Entry{{"remote_address", "1"}, {"user", "x"}},
			wantCand: "remote_address", wantReason: "descriptor has 2 entries, rule needs 1 (a rule applies only at exactly its depth)", wantCands: 1},
		{name: "wrong value", entries: []Entry{{"path", "/logout"}, {"user", "bob"}},
			wantCand: "path=/login/user", wantReason: `entry 1: value "/logout" does not match "/login"`, wantCands: 3},
		{name: "wrong second key", entries: []Entry{{"path", "/login"}, {"uid", "bob"}},
			wantCand: "path=/login/user", wantReason: `key "user" expected at entry 2, got "uid"`, wantCands: 3},
		{name: "exact value beats wildcard", entries: []Entry{{"path", "/api/health"}},
			wantCand: "path=/api/health/probe", wantReason: "descriptor has 1 entry, rule needs 2", wantCands: 3},
		{name: "no shared key", entries: []Entry{{"nothing", "x"}}, wantCands: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := c.Explain("shop", [][]Entry{tc.entries})
			if len(ex) != 1 {
				t.Fatalf("Explain = %+v", ex)
			}
			d := ex[0]
			if tc.wantName == "" {
				if len(d.Matches) != 0 {
					t.Fatalf("matches %v, want none", d.Matches[0].Limit.Name)
				}
				if len(d.Candidates) != tc.wantCands {
					t.Fatalf("%d candidates, want %d: %+v", len(d.Candidates), tc.wantCands, d.Candidates)
				}
				if tc.wantCands == 0 {
					return
				}
				cd := d.Candidates[0]
				if got := FormatPath(cd.Path); got != tc.wantCand {
					t.Errorf("first candidate %s, want %s", got, tc.wantCand)
				}
				if len(cd.Reasons) == 0 || !strings.Contains(cd.Reasons[0], tc.wantReason) {
					t.Errorf("reasons %q, want %q", cd.Reasons, tc.wantReason)
				}
				if cd.Source.File != "test.yaml" || cd.Source.Line == 0 {
					t.Errorf("candidate source %v", cd.Source)
				}
				return
			}
			if len(d.Matches) != 1 {
				t.Fatalf("%d matches, want 1", len(d.Matches))
			}
			m := d.Matches[0]
			l := m.Limit
			if l.Name != tc.wantName || l.Source().Line != tc.wantLine || l.Source().File != "test.yaml" {
				t.Errorf("matched %s at %v, want %s at line %d", l.Name, l.Source(), tc.wantName, tc.wantLine)
			}
			if l.ShadowMode != tc.wantShadow {
				t.Errorf("shadow %v, want %v", l.ShadowMode, tc.wantShadow)
			}
			// The store key is the one the Envoy API builds.
			want := string(l.AppendKey(nil, tc.entries))
			if tc.wantNoKey {
				want = ""
			}
			if m.StoreKey != want {
				t.Errorf("store key %q, want %q", m.StoreKey, want)
			}
		})
	}
}

// A value that a wildcard matches but an exact sibling takes: the
// wildcard rule is a candidate whose reason names the sibling.
func TestExplainPrecedence(t *testing.T) {
	c := mustParse(t, explainYAML)
	d := c.Explain("shop", [][]Entry{{{"path", "/api/health"}}})[0]
	i := slices.IndexFunc(d.Candidates, func(cd Candidate) bool { return FormatPath(cd.Path) == "path=/api/*" })
	want := `entry 1: path="/api/health" goes to key "path" with value "/api/health" (at test.yaml:14:5), which takes precedence over key "path" with value "/api/*"`
	if i < 0 || len(d.Candidates[i].Reasons) != 1 || d.Candidates[i].Reasons[0] != want {
		t.Fatalf("candidates %+v, want path=/api/* with reason %s", d.Candidates, want)
	}
}

func TestExplainStoreKeyLayout(t *testing.T) {
	c := mustParse(t, explainYAML)
	// A plain wildcard counts every value apart.
	p := c.Explain("shop", [][]Entry{{{"file", "a.pdf"}}, {{"file", "b.pdf"}}})
	if ka, kb := p[0].Matches[0].StoreKey, p[1].Matches[0].StoreKey; ka == kb || !strings.HasSuffix(ka, "|5:a.pdf") {
		t.Errorf("wildcard keys %q and %q, want one per value", ka, kb)
	}
	// share_threshold leaves the value out: two paths share one key.
	a := c.Explain("shop", [][]Entry{{{"path", "/api/a"}}})[0].Matches[0]
	b := c.Explain("shop", [][]Entry{{{"path", "/api/b"}}})[0].Matches[0]
	if a.StoreKey != b.StoreKey || !strings.HasSuffix(a.StoreKey, "|*") {
		t.Errorf("share_threshold keys %q and %q, want one shared key ending |*", a.StoreKey, b.StoreKey)
	}
	m := c.Explain("shop", [][]Entry{{{"remote_address", "10.0.0.1"}}})[0].Matches[0]
	want := "e" + keys.LimitID(m.Limit.ID) + "|8:10.0.0.1"
	if m.StoreKey != want {
		t.Errorf("store key %q, want %q", m.StoreKey, want)
	}
}

func TestExplainReplaces(t *testing.T) {
	c := mustParse(t, explainYAML)
	ex := c.Explain("shop", [][]Entry{{{"tier", "free"}}, {{"plan", "gold"}}})
	prem := ex[1].Matches[0]
	if prem.Limit.Name != "premium" || prem.ReplacedBy != "shop.tier_free" {
		t.Errorf("premium replaced by %q, want shop.tier_free", prem.ReplacedBy)
	}
	if ex[0].Matches[0].ReplacedBy != "" {
		t.Errorf("the replacing limit is itself replaced")
	}
	// Alone, premium applies.
	if r := c.Explain("shop", [][]Entry{{{"plan", "gold"}}})[0].Matches[0].ReplacedBy; r != "" {
		t.Errorf("premium alone replaced by %q", r)
	}
}

func TestExplainUnknownDomain(t *testing.T) {
	c := mustParse(t, explainYAML)
	ex := c.Explain("nope", [][]Entry{{{"remote_address", "1"}}})
	if len(ex) != 1 || len(ex[0].Matches) != 0 || len(ex[0].Candidates) != 0 {
		t.Errorf("Explain(unknown domain) = %+v", ex)
	}
}

func TestExplainQuota(t *testing.T) {
	c := mustParse(t, quotaYAML)
	for _, tc := range []struct {
		id         map[string]string
		wantName   string
		wantAction QuotaAction
		wantLine   int
		// a reason given for the entry at line reasonLine
		reasonLine int
		reason     string
	}{
		{map[string]string{"name": "free", "api_key": "k1"}, "free_per_key", QuotaRateLimit, 8,
			6, "matches, but free_per_key is more specific"},
		{map[string]string{"name": "free", "api_key": "k1"}, "free_per_key", QuotaRateLimit, 8,
			10, `key "api_key": value "k1" does not match "vip"`},
		{map[string]string{"name": "banned"}, "api.quota.name_banned", QuotaDenyAll, 14,
			12, `bucket id has no key "api_key"`},
	} {
		ex := c.ExplainQuota("api", tc.id)
		if ex.Bucket == nil || ex.Bucket.Name != tc.wantName || ex.Action != tc.wantAction || ex.Bucket.Source.Line != tc.wantLine {
			t.Errorf("ExplainQuota(%v) = %+v, want %s %v at line %d", tc.id, ex.Bucket, tc.wantName, tc.wantAction, tc.wantLine)
			continue
		}
		i := slices.IndexFunc(ex.Others, func(q QuotaCandidate) bool { return q.Bucket.Source.Line == tc.reasonLine })
		if i < 0 || !slices.ContainsFunc(ex.Others[i].Reasons, func(r string) bool { return strings.Contains(r, tc.reason) }) {
			t.Errorf("ExplainQuota(%v): no reason %q for line %d in %+v", tc.id, tc.reason, tc.reasonLine, ex.Others)
		}
		if !ex.Others[0].Matches {
			t.Errorf("matching entries are not listed first")
		}
	}
	// Unmatched: the domain's quota_unmatched, and every entry with a reason.
	c2 := mustParse(t, "domain: d\nquota_unmatched: deny_all\nquota_buckets:\n  - bucket_id: {name: a}\n    blanket_rule: allow_all\n")
	ex := c2.ExplainQuota("d", map[string]string{"name": "b"})
	if ex.Bucket != nil || ex.Action != QuotaDenyAll || len(ex.Others) != 1 || len(ex.Others[0].Reasons) != 1 {
		t.Errorf("unmatched: %+v", ex)
	}
}

func TestSources(t *testing.T) {
	c := mustParse(t, explainYAML+"policies:\n  login:\n    requests_per_min: 5\n")
	if p := c.PolicySource("login"); p != (Source{File: "test.yaml", Line: 32, Column: 3}) {
		t.Errorf("policy source %v", p)
	}
	for _, l := range c.Limits() {
		if l.Source().File != "test.yaml" || l.Source().Line == 0 || l.Source().Column == 0 {
			t.Errorf("limit %s has source %v", l.Name, l.Source())
		}
	}
	if c.LoadedAt().IsZero() {
		t.Error("LoadedAt is zero")
	}
	x, err := ParseXDS("xds:shop", "shop-rules", "v7", []byte(explainYAML))
	if err != nil {
		t.Fatal(err)
	}
	want := Source{XDSResource: "shop-rules", Version: "v7"}
	for _, l := range x.Limits() {
		if l.Source() != want {
			t.Errorf("xds limit %s has source %v", l.Name, l.Source())
		}
	}
	if x.PolicySource("login") != (Source{}) {
		t.Errorf("xds config has a policy it was not given")
	}
	xq, err := ParseXDS("xds:q", "quota-res", "v2", []byte(quotaYAML))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range xq.QuotaBuckets("api") {
		if q.Source != (Source{XDSResource: "quota-res", Version: "v2"}) || (q.Limit != nil && q.Limit.Source() != q.Source) {
			t.Errorf("xds quota bucket %s has source %v", q.Name, q.Source)
		}
	}
	if got := want.String(); got != `xds resource "shop-rules" (version "v7")` {
		t.Errorf("String() = %s", got)
	}
	if _, err := ParseXDS("xds:bad", "bad", "v1", []byte("domain: [")); err == nil || !strings.Contains(err.Error(), "xds:bad") {
		t.Errorf("ParseXDS error %v, want it named xds:bad", err)
	}
}
