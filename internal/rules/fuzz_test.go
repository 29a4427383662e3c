package rules

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/internal/keys"
)

// FuzzParse feeds arbitrary bytes to Parse: it must never panic, must fail
// only with ErrInvalid, and what it accepts must be consistent.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/*/*.yaml", "testdata/*/*.yml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte(matchConfig))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("domain: d\ndescriptors: &x\n  - key: k\n    descriptors: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			if c != nil {
				t.Fatal("a Set with an error")
			}
			return
		}
		ids := map[string]bool{}
		for _, l := range c.Limits() {
			if ids[l.ID] {
				t.Fatalf("ID %q twice", l.ID)
			}
			ids[l.ID] = true
			if !l.Unlimited && !l.DenyAll {
				if err := l.Rate.Validate(); err != nil {
					t.Fatalf("limit %s: %v", l.Name, err)
				}
			}
			// A request spelling out the rule's keys and values reaches it
			// when every level has a value (exact matches always win); a
			// network's address may belong to a longer network beside it.
			var entries []Entry
			exact := true
			for _, lv := range l.path {
				exact = exact && lv.value != "" && !lv.cidr
				entries = append(entries, Entry{lv.key, lv.value})
			}
			if exact && !slices.Contains(c.Match(l.Domain, entries), l) {
				t.Fatalf("limit %s not matched by its own path %v", l.ID, entries)
			}
		}
		for _, p := range c.Policies() {
			if err := p.Rate.Validate(); err != nil {
				t.Fatalf("policy %s: %v", p.Name, err)
			}
		}
	})
}

// oracle is an independent, literal reading of envoyproxy/ratelimit's
// matching over the raw YAML: linear scans in file order.
type oracleNode struct {
	Key         string       `yaml:"key"`
	Value       string       `yaml:"value"`
	Match       string       `yaml:"match"`
	RateLimit   *oracleLimit `yaml:"rate_limit"`
	Descriptors []oracleNode `yaml:"descriptors"`
}

type oracleLimit struct {
	Name string `yaml:"name"`
}

type oracleFile struct {
	Domain      string       `yaml:"domain"`
	Descriptors []oracleNode `yaml:"descriptors"`
}

func oracleMatch(f oracleFile, domain string, entries []Entry) string {
	if domain != f.Domain || len(entries) == 0 {
		return ""
	}
	level, name := f.Descriptors, f.Domain
	var found *oracleNode
	for _, en := range entries {
		found = nil
		for i := range level { // exact
			if d := &level[i]; d.Key == en.Key && d.Match == "" && d.Value != "" && d.Value == en.Value {
				found = d
				break
			}
		}
		if a, err := netip.ParseAddr(en.Value); found == nil && err == nil { // longest network
			best := -1
			for i := range level {
				d := &level[i]
				if p, err := netip.ParsePrefix(d.Value); d.Key == en.Key && d.Match == "cidr" && err == nil && p.Contains(a.Unmap()) && p.Bits() > best {
					found, best = d, p.Bits()
				}
			}
		}
		for i := range level { // first wildcard
			if d := &level[i]; found == nil && d.Key == en.Key && strings.Contains(d.Value, "*") && oracleGlob(d.Value).MatchString(en.Value) {
				found = d
			}
		}
		for i := range level { // key only
			if d := &level[i]; found == nil && d.Key == en.Key && d.Value == "" {
				found = d
			}
		}
		if found == nil {
			return ""
		}
		name += "." + found.Key
		if found.Value != "" {
			name += "_" + found.Value
		}
		level = found.Descriptors
	}
	switch {
	case found.RateLimit == nil:
		return ""
	case found.RateLimit.Name != "":
		return found.RateLimit.Name
	}
	return name
}

// oracleGlob reads a wildcard value as a regular expression: every '*'
// is any run of characters (newlines too), the rest literal.
func oracleGlob(value string) *regexp.Regexp {
	parts := strings.Split(value, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)\A` + strings.Join(parts, ".*") + `\z`)
}

// FuzzMatch checks Match against the oracle on arbitrary descriptors, over
// matchConfig (domain m), wildConfig (domain w) and cidrConfig (domain c).
func FuzzMatch(f *testing.F) {
	var cs []*Set
	var ofs []oracleFile
	for _, src := range []string{matchConfig, wildConfig, cidrConfig} {
		cs = append(cs, mustParse(f, src))
		var of oracleFile
		if err := yaml.Unmarshal([]byte(src), &of); err != nil {
			f.Fatal(err)
		}
		ofs = append(ofs, of)
	}
	f.Add("m", "path", "/api/users", "", "", "", "", uint8(1))
	f.Add("m", "tenant", "acme", "user", "root", "", "", uint8(2))
	f.Add("m", "tenant", "x", "user", "bob", "z", "z", uint8(3))
	f.Add("m", "catchall", "", "never", "", "", "", uint8(2))
	f.Add("m", "key", "with_underscore", "", "", "", "", uint8(1))
	f.Add("other", "path", "/api/x", "", "", "", "", uint8(1))
	f.Add("w", "path", "/api/v2/items", "", "", "", "", uint8(1))
	f.Add("w", "rpc", "svc-a.ep-b.rpc", "", "", "", "", uint8(1))
	f.Add("w", "rpc", "abaca", "", "", "", "", uint8(1))
	f.Add("w", "file", "x.pdf.y", "", "", "", "", uint8(1))
	f.Add("w", "tenant", "team-a-prod", "path", "/x/export", "", "", uint8(2))
	f.Add("c", "remote_address", "10.1.2.4", "", "", "", "", uint8(1))
	f.Add("c", "remote_address", "::ffff:10.1.2.3", "", "", "", "", uint8(1))
	f.Add("c", "remote_address", "2001:db8:1:2::1", "", "", "", "", uint8(1))
	f.Add("c", "remote_address", "10.0.0.0/8", "", "", "", "", uint8(1))
	f.Add("c", "client", "::ffff:1.2.3.4", "path", "/login", "", "", uint8(2))
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2, k3, v3 string, n uint8) {
		all := []Entry{{k1, v1}, {k2, v2}, {k3, v3}}
		entries := all[:int(n)%4]
		c, of := cs[0], ofs[0]
		switch domain {
		case "w":
			c, of = cs[1], ofs[1]
		case "c":
			c, of = cs[2], ofs[2]
		}
		want := oracleMatch(of, domain, entries)
		got := c.Match(domain, entries)
		switch {
		case want == "" && got != nil:
			t.Fatalf("Match(%q, %v) = %v, want nil", domain, entries, names(got))
		case want != "" && (len(got) != 1 || got[0].Name != want):
			t.Fatalf("Match(%q, %v) = %v, want [%s]", domain, entries, names(got), want)
		}
		if len(got) == 1 {
			key := got[0].AppendKey(nil, entries)
			if !strings.HasPrefix(string(key), string(keys.AppendEnvoy(nil, keys.LimitID(got[0].ID)))) {
				t.Fatalf("key %q does not start with the digest of the ID %q", key, got[0].ID)
			}
		}
	})
}
