package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFolder writes name -> content files into a new folder.
func writeFolder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	mdK1 = "domain: d\ndescriptors:\n  - key: k1\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
	mdK2 = "domain: d\ndescriptors:\n  - key: k2\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
)

// TestMergeDomainsVerdicts holds envoyproxy/ratelimit's loader verdicts
// (its config_check with -merge_domain_configs=true, run on these very
// folders) beside floodgate's: a later file adds top-level descriptors; a
// top-level key+value defined twice is refused whatever is nested below.
func TestMergeDomainsVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		// want is "" for accepted, else a piece of the error; the
		// reference's own message is in the comment.
		want string
	}{
		{"distinct keys", map[string]string{"a.yaml": mdK1, "b.yaml": mdK2}, ""},
		{"same key", map[string]string{"a.yaml": mdK1, "b.yaml": strings.Replace(mdK2, "k2", "k1", 1)},
			`b.yaml:3:5: duplicate descriptor: key "k1" is already defined for domain "d" at `}, // duplicate descriptor composite key 'd.k1'
		{"same key other values", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: k1\n    value: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: k1\n    value: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n"}, ""},
		{"key only beside a value", map[string]string{
			"a.yaml": mdK1,
			"b.yaml": "domain: d\ndescriptors:\n  - key: k1\n    value: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n"}, ""},
		{"nested trees are not merged", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: k1\n    descriptors:\n      - key: a\n        rate_limit: {unit: second, requests_per_unit: 1}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: k1\n    descriptors:\n      - key: b\n        rate_limit: {unit: second, requests_per_unit: 1}\n"},
			`duplicate descriptor: key "k1" is already defined`}, // duplicate descriptor composite key 'd.k1'
		{"same wildcard", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: k1\n    value: \"f*\"\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: k1\n    value: \"f*\"\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"},
			`duplicate descriptor: key "k1" with value "f*" is already defined`}, // duplicate descriptor composite key 'd.k1_f*'
		{"other wildcards", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: k1\n    value: \"f*\"\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: k1\n    value: \"fo*\"\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"}, ""},
		{"replaces across files", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: k1\n    rate_limit: {unit: second, requests_per_unit: 1, name: one}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: k2\n    rate_limit: {unit: minute, requests_per_unit: 2, replaces: [{name: one}]}\n"}, ""},
		{"a domain with no descriptors", map[string]string{"a.yaml": mdK1, "b.yaml": "domain: d\n"}, ""},
		{"a bad unit in the later file", map[string]string{
			"a.yaml": mdK1, "b.yaml": strings.Replace(mdK2, "minute", "fortnight", 1)}, "fortnight"}, // invalid rate limit unit 'fortnight'
		{"a duplicate inside the later file", map[string]string{
			"a.yaml": mdK1, "b.yaml": mdK2 + "  - key: k2\n    rate_limit: {unit: second, requests_per_unit: 1}\n"},
			`duplicate descriptor: key "k2" is already defined at line 3`}, // duplicate descriptor composite key 'd.k2'
		{"three files", map[string]string{"a.yaml": mdK1, "b.yaml": mdK2,
			"c.yaml": "domain: d\ndescriptors:\n  - key: k1\n    value: x\n    rate_limit: {unit: second, requests_per_unit: 1}\n"}, ""},
		{"the third file conflicts with the first", map[string]string{"a.yaml": mdK1, "b.yaml": mdK2, "c.yaml": mdK1},
			`c.yaml:3:5: duplicate descriptor: key "k1" is already defined for domain "d" at `},
		{"other domains", map[string]string{"a.yaml": mdK1, "b.yaml": strings.Replace(mdK1, "domain: d", "domain: e", 1)}, ""},
		// floodgate's own keys: networks merge like values; quota
		// buckets stay in one file.
		{"other networks", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: ip\n    match: cidr\n    value: 10.0.0.0/8\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: ip\n    match: cidr\n    value: 10.1.0.0/16\n    rate_limit: {unit: second, requests_per_unit: 1}\n"}, ""},
		{"the same network", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: ip\n    match: cidr\n    value: 2001:db8::/32\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: ip\n    match: cidr\n    value: 2001:0db8::/32\n    rate_limit: {unit: second, requests_per_unit: 1}\n"},
			`duplicate descriptor: key "ip" with match: cidr 2001:db8::/32 is already defined`},
		{"quota buckets in two files", map[string]string{
			"a.yaml": mdK1 + "quota_unmatched: deny_all\n",
			"b.yaml": mdK2 + "quota_unmatched: abandon\n"}, `quota_buckets or quota_unmatched of domain "d" are already given`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFolder(t, tc.files)
			_, err := Load(dir, Options{MergeDomains: true})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one holding %q", err, tc.want)
			}
			// Without merging, a domain in two files is refused (the
			// reference: "duplicate domain 'd' in config file"), unless
			// the later file is refused on its own first.
			_, err = Load(dir, Options{})
			twoFiles := strings.Count(strings.Join(mapValues(tc.files), ""), "domain: d\n") > 1
			msg := fmt.Sprint(err)
			if twoFiles && tc.want == "" && !strings.Contains(msg, `duplicate domain "d"`) && !strings.Contains(msg, "replaces names") {
				t.Errorf("without merging: %v, want a duplicate domain", err)
			}
		})
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestMergeDomainsDecides checks what a merged domain matches: every
// file's descriptors, wildcards in file-name order after the earlier
// files', replaces across files, networks of both files.
func TestMergeDomainsDecides(t *testing.T) {
	dir := writeFolder(t, map[string]string{
		"a.yaml": "domain: d\ndescriptors:\n" +
			"  - key: k1\n    rate_limit: {unit: second, requests_per_unit: 1, name: one}\n" +
			"  - key: p\n    value: \"ab*\"\n    rate_limit: {unit: second, requests_per_unit: 3}\n" +
			"  - key: ip\n    match: cidr\n    value: 10.0.0.0/8\n    rate_limit: {unit: second, requests_per_unit: 4}\n",
		"b.yaml": "domain: d\ndescriptors:\n" +
			"  - key: k2\n    rate_limit: {unit: minute, requests_per_unit: 2, replaces: [{name: one}]}\n" +
			"  - key: p\n    value: \"a*\"\n    rate_limit: {unit: second, requests_per_unit: 5}\n" +
			"  - key: ip\n    match: cidr\n    value: 10.1.0.0/16\n    rate_limit: {unit: second, requests_per_unit: 6}\n" +
			"  - key: k1\n    value: x\n    descriptors:\n      - key: n\n        rate_limit: {unit: hour, requests_per_unit: 7}\n",
	})
	c, err := Load(dir, Options{MergeDomains: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		entries []Entry
		want    int64 // requests of the one limit matched; 0: none
	}{
		{[]Entry{{"k1", "v"}}, 1},
		{[]Entry{{"k2", "v"}}, 2},
		{[]Entry{{"p", "abc"}}, 3}, // a.yaml's wildcard comes first
		{[]Entry{{"p", "axc"}}, 5},
		{[]Entry{{"ip", "10.9.9.9"}}, 4},
		{[]Entry{{"ip", "10.1.2.3"}}, 6}, // the longest network, whichever file
		{[]Entry{{"k1", "x"}, {"n", "v"}}, 7},
		{[]Entry{{"k3", "v"}}, 0},
	} {
		ls := c.Match("d", tc.entries)
		var got int64
		if len(ls) == 1 {
			got = ls[0].Rate.Requests
		} else if len(ls) > 1 {
			t.Fatalf("%v: %d limits", tc.entries, len(ls))
		}
		if got != tc.want {
			t.Errorf("%v: limit of %d requests, want %d", tc.entries, got, tc.want)
		}
	}
	got := c.MatchRequest("d", [][]Entry{{{"k1", "v"}}, {{"k2", "v"}}})
	if len(got[0]) != 0 || len(got[1]) != 1 {
		t.Errorf("b.yaml's limit replaces a.yaml's: %v", got)
	}
	if n := len(c.Limits()); n != 7 {
		t.Errorf("%d limits, want 7", n)
	}
	if got := strings.Join(c.Domains(), ","); got != "d" {
		t.Errorf("domains %s", got)
	}
}

// TestMergeDomainsUnresolvedReplaces: a replaces entry naming a limit of
// no file of its domain is refused, merged or not, at its own position.
func TestMergeDomainsUnresolvedReplaces(t *testing.T) {
	dir := writeFolder(t, map[string]string{
		"a.yaml": mdK1,
		"b.yaml": "domain: d\ndescriptors:\n  - key: k2\n    rate_limit: {unit: minute, requests_per_unit: 2, replaces: [{name: nobody}]}\n",
		"c.yaml": "domain: e\ndescriptors:\n  - key: k2\n    rate_limit: {unit: minute, requests_per_unit: 2, name: nobody}\n",
	})
	_, err := Load(dir, Options{MergeDomains: true})
	if err == nil || !strings.Contains(err.Error(), `b.yaml:4:`) || !strings.Contains(err.Error(), `replaces names "nobody", but no limit in domain "d" has that name`) {
		t.Fatalf("got %v", err)
	}
}

// TestMergeDomainsQuotaFromLaterFile: a domain's quota buckets may come
// from any one of its files.
func TestMergeDomainsQuotaFromLaterFile(t *testing.T) {
	dir := writeFolder(t, map[string]string{"a.yaml": mdK1, "b.yaml": mdK2 + "quota_unmatched: deny_all\n"})
	c, err := Load(dir, Options{MergeDomains: true})
	if err != nil {
		t.Fatal(err)
	}
	if a := c.QuotaUnmatched("d"); a != QuotaDenyAll {
		t.Errorf("unmatched bucket gets %v, want deny_all from b.yaml", a)
	}
	// And from the first file, a later one having none.
	dir = writeFolder(t, map[string]string{"a.yaml": mdK1 + "quota_unmatched: deny_all\n", "b.yaml": mdK2})
	if c, err = Load(dir, Options{MergeDomains: true}); err != nil {
		t.Fatal(err)
	}
	if a := c.QuotaUnmatched("d"); a != QuotaDenyAll {
		t.Errorf("unmatched bucket gets %v, want deny_all from a.yaml", a)
	}
}
