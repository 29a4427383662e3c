package rules

import (
	"testing"
	"unicode/utf8"
)

// wildConfig holds the reference's wildcard forms: '*' at the end, at the
// start, in the middle, several of them, and alone, with exact and
// key-only rules beside them.
const wildConfig = `domain: w
descriptors:
  - key: path
    value: /api/*/items
    rate_limit: {unit: second, requests_per_unit: 1, name: items}
  - key: path
    value: /api/v1/items
    rate_limit: {unit: second, requests_per_unit: 2, name: v1_items_exact}
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 3, name: api_prefix}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 4, name: any_path}
  - key: file
    value: "*.pdf"
    rate_limit: {unit: second, requests_per_unit: 5, name: pdf}
  - key: file
    value: "*.pdf.*"
    rate_limit: {unit: second, requests_per_unit: 6, name: pdf_dot}
  - key: rpc
    value: svc*ep*rpc
    rate_limit: {unit: second, requests_per_unit: 7, name: several}
  - key: rpc
    value: a*a
    rate_limit: {unit: second, requests_per_unit: 8, name: a_star_a}
  - key: rpc
    value: x**y
    rate_limit: {unit: second, requests_per_unit: 9, name: double_star}
  - key: host
    value: "*.example.com"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 10, name: subdomains}
  - key: host
    value: "*"
    rate_limit: {unit: minute, requests_per_unit: 11, name: any_host}
  - key: tenant
    value: team-*-prod
    descriptors:
      - key: path
        value: "*/export"
        share_threshold: true
        rate_limit: {unit: hour, requests_per_unit: 12, name: prod_export}
      - key: path
        rate_limit: {unit: hour, requests_per_unit: 13, name: prod_any}
`

// TestWildcardMatch pins envoyproxy/ratelimit's documented wildcard
// behaviour: '*' anywhere in a value stands for any run of characters
// (none included, '/' included); at one level an exact value wins, then
// the first wildcard in file order, then the key-only rule.
func TestWildcardMatch(t *testing.T) {
	c := mustParse(t, wildConfig)
	tests := []struct {
		name    string
		entries []Entry
		want    string // "" for no limit
	}{
		{"middle", e("path", "/api/v2/items"), "items"},
		{"middle spans slashes", e("path", "/api/a/b/items"), "items"},
		{"middle matches nothing between", e("path", "/api//items"), "items"},
		{"middle needs the suffix", e("path", "/api/v2/items/3"), "api_prefix"},
		{"prefix and suffix may not overlap", e("path", "/api/items"), "api_prefix"},
		{"exact beats an earlier wildcard", e("path", "/api/v1/items"), "v1_items_exact"},
		{"first wildcard in file order wins", e("path", "/api/x/items"), "items"},
		{"trailing", e("path", "/api/users"), "api_prefix"},
		{"trailing matches the bare prefix", e("path", "/api/"), "api_prefix"},
		{"key-only when no wildcard matches", e("path", "/static/app.js"), "any_path"},
		{"leading", e("file", "report.pdf"), "pdf"},
		{"leading matches the bare suffix", e("file", ".pdf"), "pdf"},
		{"leading needs the suffix", e("file", "report.pdf.exe"), "pdf_dot"},
		{"leading, no match, no key-only rule", e("file", "report.doc"), ""},
		{"several stars", e("rpc", "svc-a.ep-b.rpc"), "several"},
		{"several stars, all empty", e("rpc", "svceprpc"), "several"},
		{"several stars, parts in order", e("rpc", "svc.rpc.ep"), ""},
		{"several stars, too short", e("rpc", "svcrpc"), ""},
		{"a*a needs two a's", e("rpc", "a"), ""},
		{"a*a", e("rpc", "aa"), "a_star_a"},
		{"a*a with more a's", e("rpc", "abaca"), "a_star_a"},
		{"double star is one star", e("rpc", "x-y"), "double_star"},
		{"double star, empty", e("rpc", "xy"), "double_star"},
		{"the literal pattern matches exactly", e("rpc", "svc*ep*rpc"), "several"},
		{"shared leading wildcard", e("host", "a.example.com"), "subdomains"},
		{"lone star catches the rest", e("host", "example.org"), "any_host"},
		{"lone star matches the empty value", e("host", ""), "any_host"},
		{"nested: middle then leading", e("tenant", "team-a-prod", "path", "/x/export"), "prod_export"},
		{"nested: middle then key-only", e("tenant", "team-a-prod", "path", "/x/import"), "prod_any"},
		{"nested: middle needs its suffix", e("tenant", "team-a-dev", "path", "/x/export"), ""},
		{"depth still counts", e("tenant", "team-a-prod"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Match("w", tt.entries)
			if tt.want == "" {
				if got != nil {
					t.Fatalf("Match(%v) = %v, want nil", tt.entries, names(got))
				}
				return
			}
			if len(got) != 1 || got[0].Name != tt.want {
				t.Fatalf("Match(%v) = %v, want [%s]", tt.entries, names(got), tt.want)
			}
		})
	}
}

// TestWildcardCounters checks that every value matching a wildcard counts
// on its own, unless share_threshold is set, whatever the wildcard's form.
func TestWildcardCounters(t *testing.T) {
	c := mustParse(t, wildConfig)
	key := func(entries []Entry) string {
		t.Helper()
		return string(one(t, c, "w", entries...).AppendKey(nil, entries))
	}
	tests := []struct {
		name   string
		a, b   []Entry
		shared bool
	}{
		{"middle, not shared", e("path", "/api/a/items"), e("path", "/api/b/items"), false},
		{"leading, not shared", e("file", "a.pdf"), e("file", "b.pdf"), false},
		{"several, not shared", e("rpc", "svc1ep1rpc"), e("rpc", "svc2ep2rpc"), false},
		{"leading, shared", e("host", "a.example.com"), e("host", "b.example.com"), true},
		{"middle then leading shared", e("tenant", "team-a-prod", "path", "/a/export"), e("tenant", "team-a-prod", "path", "/b/export"), true},
		{"middle above a shared level, not shared", e("tenant", "team-a-prod", "path", "/a/export"), e("tenant", "team-b-prod", "path", "/a/export"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ka, kb := key(tt.a), key(tt.b); (ka == kb) != tt.shared {
				t.Errorf("keys %q and %q: shared = %v, want %v", ka, kb, ka == kb, tt.shared)
			}
		})
	}
}

func TestWildcardMatchDoesNotAllocate(t *testing.T) {
	c := mustParse(t, wildConfig)
	reqs := [][]Entry{
		e("path", "/api/v2/items"), e("file", "report.pdf.exe"), e("rpc", "svc-a.ep-b.rpc"),
		e("tenant", "team-a-prod", "path", "/x/export"),
	}
	if n := testing.AllocsPerRun(200, func() {
		for _, r := range reqs {
			c.Match("w", r)
		}
	}); n != 0 {
		t.Errorf("Match allocates %v times per run, want 0", n)
	}
}

// FuzzPattern checks pattern.match against a regular expression built
// from the same value.
func FuzzPattern(f *testing.F) {
	for _, s := range [][2]string{
		{"/api/*/items", "/api/v1/items"}, {"*.pdf", "a.pdf"}, {"svc*ep*rpc", "svc.ep.rpc"},
		{"a*a", "a"}, {"*", ""}, {"**", "x"}, {"a*b*a", "aba"}, {"*ab*ab*", "abab"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, value, s string) {
		// The oracle's regular expressions need valid UTF-8 (and would read
		// a bad byte as U+FFFD).
		if !isWildcard(value) || !utf8.ValidString(value) || !utf8.ValidString(s) {
			return
		}
		p := compilePattern(value)
		if got, want := p.match(s), oracleGlob(value).MatchString(s); got != want {
			t.Fatalf("pattern %q on %q: match = %v, want %v", value, s, got, want)
		}
	})
}
