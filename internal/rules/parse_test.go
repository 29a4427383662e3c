package rules

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

func mustLoad(t testing.TB, path string) *Set {
	t.Helper()
	c, err := Load(path, Options{})
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return c
}

func mustParse(t testing.TB, yaml string) *Set {
	t.Helper()
	c, err := Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// one returns the single limit matched by entries, failing otherwise.
func one(t testing.TB, c *Set, domain string, entries ...Entry) *Limit {
	t.Helper()
	ls := c.Match(domain, entries)
	if len(ls) != 1 {
		t.Fatalf("Match(%s, %v) = %d limits, want 1", domain, entries, len(ls))
	}
	return ls[0]
}

func e(kv ...string) []Entry {
	var out []Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Entry{kv[i], kv[i+1]})
	}
	return out
}

func TestLoadEnvoyExamples(t *testing.T) {
	c := mustLoad(t, "testdata/envoy")
	if got, want := c.Domains(), []string{"edge_proxy_per_ip", "example5", "messaging", "mongo_cps", "rl"}; !slices.Equal(got, want) {
		t.Fatalf("Domains() = %v, want %v", got, want)
	}
	if got := len(c.Files()); got != 5 {
		t.Errorf("Files() has %d files, want 5", got)
	}
	fw := func(n int64, d time.Duration) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Period: d}
	}
	day := 24 * time.Hour
	tests := []struct {
		domain  string
		entries []Entry
		name    string
		rate    algorithms.Limit
		flags   string // u=unlimited d=deny s=shadow m=detailed
	}{
		{"mongo_cps", e("database", "users"), "mongo_cps.database_users", fw(500, time.Second), ""},
		{"messaging", e("message_type", "marketing", "to_number", "2061234567"), "messaging.message_type_marketing.to_number", fw(5, day), ""},
		{"messaging", e("to_number", "2061234567"), "messaging.to_number", fw(100, day), ""},
		{"edge_proxy_per_ip", e("remote_address", "10.0.0.1"), "edge_proxy_per_ip.remote_address", fw(10, time.Second), ""},
		{"edge_proxy_per_ip", e("remote_address", "50.0.0.5"), "edge_proxy_per_ip.remote_address_50.0.0.5", fw(0, time.Second), "d"},
		{"rl", e("category", "account"), "rl.category_account", fw(4, time.Minute), ""},
		{"rl", e("source_cluster", "proxy", "destination_cluster", "bkthomps"), "bkthomps", fw(1, time.Minute), ""},
		{"rl", e("source_cluster", "proxy", "destination_cluster", "other"), "fake_name", fw(2, time.Minute), ""},
		{"rl", e("foo", "x", "bar", "bar", "baz", "shady"), "rl.foo.bar_bar.baz_shady", fw(3, time.Minute), ""},
		{"rl", e("foo", "x", "bar", "bar", "bay", "y"), "rl.foo.bar_bar.bay", algorithms.Limit{}, "u"},
		{"example5", e("key5", "value5"), "example5.key5_value5", fw(2, time.Minute), "s"},
		{"example5", e("path", "/bar/x"), "example5.path_/bar/*", fw(50, 2*time.Hour), ""},
		{"example5", e("ldap", "cn=x"), "example5.ldap", algorithms.Limit{}, "u"},
		{"example5", e("azure", "a"), "example5.azure", fw(100, 7*day), "m"},
		{"example5", e("client", "monthly"), "example5.client_monthly", fw(1000, 30*day), ""},
		{"example5", e("client", "yearly"), "example5.client_yearly", fw(10000, 365*day), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := one(t, c, tt.domain, tt.entries...)
			if l.Name != tt.name {
				t.Errorf("Name = %q, want %q", l.Name, tt.name)
			}
			if l.Rate != tt.rate {
				t.Errorf("Rate = %+v, want %+v", l.Rate, tt.rate)
			}
			flags := ""
			for _, f := range []struct {
				on bool
				c  string
			}{{l.Unlimited, "u"}, {l.DenyAll, "d"}, {l.ShadowMode, "s"}, {l.DetailedMetric, "m"}} {
				if f.on {
					flags += f.c
				}
			}
			if flags != tt.flags {
				t.Errorf("flags = %q, want %q", flags, tt.flags)
			}
			if l.Domain != tt.domain {
				t.Errorf("Domain = %q, want %q", l.Domain, tt.domain)
			}
			if !l.Unlimited && !l.DenyAll {
				if err := l.Rate.Validate(); err != nil {
					t.Errorf("Rate.Validate() = %v", err)
				}
			}
		})
	}
}

func TestParseExtensions(t *testing.T) {
	c := mustLoad(t, "testdata/valid/api.yaml")
	ls := c.Match("api", e("api_key", "k1"))
	if len(ls) != 2 {
		t.Fatalf("api_key: %d limits, want 2", len(ls))
	}
	want := []struct {
		name   string
		rate   algorithms.Limit
		shadow bool
	}{
		{"api_key_rate", algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second, Burst: 20}, false},
		{"daily_quota", algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10000, Period: 24 * time.Hour}, true},
	}
	for i, w := range want {
		if ls[i].Name != w.name || ls[i].Rate != w.rate || ls[i].ShadowMode != w.shadow {
			t.Errorf("limit %d = {%q %+v shadow=%v}, want {%q %+v shadow=%v}", i, ls[i].Name, ls[i].Rate, ls[i].ShadowMode, w.name, w.rate, w.shadow)
		}
	}
	if ls[0].ID == ls[1].ID {
		t.Errorf("two limits on one descriptor share ID %q", ls[0].ID)
	}

	login := one(t, c, "api", e("api_key", "k1", "path", "/login")...)
	if want := (algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 5, Period: 15 * time.Minute}); login.Rate != want || login.FailureMode != FailureClosed {
		t.Errorf("login = %+v %v, want %+v closed", login.Rate, login.FailureMode, want)
	}
	pro := one(t, c, "api", e("tier", "pro")...)
	if pro.FailureMode != FailureOpen || pro.Rate.Burst != 500 {
		t.Errorf("pro = %+v %v, want burst 500, open", pro.Rate, pro.FailureMode)
	}
	free := one(t, c, "api", e("tier", "free")...)
	if free.FailureMode != FailureDefault || free.Rate.Burst != 30 || free.Rate.Requests != 15 {
		t.Errorf("free = %+v %v, want 15/min burst 30, default", free.Rate, free.FailureMode)
	}
	ip := one(t, c, "api", e("remote_address", "1.2.3.4")...)
	if want := (algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 100, Period: 1500 * time.Millisecond}); ip.Rate != want {
		t.Errorf("remote_address = %+v, want %+v (default_algorithm)", ip.Rate, want)
	}
	edge := one(t, c, "api", e("edge", "x")...)
	if edge.Rate.Algorithm != algorithms.SlidingWindowLog || edge.Rate.Period != 2*time.Second {
		t.Errorf("edge = %+v", edge.Rate)
	}
}

func TestPolicies(t *testing.T) {
	c := mustLoad(t, "testdata/valid/tiers.yaml")
	tb := func(n int64, d time.Duration, burst int64) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: n, Period: d, Burst: burst}
	}
	tests := []Policy{
		{Name: "free", Rate: tb(15, time.Minute, 30)},
		{Name: "basic", Rate: tb(60, time.Minute, 100)},
		{Name: "pro", Rate: tb(240, time.Minute, 500)},
		{Name: "login", Rate: algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 5, Period: 15 * time.Minute}, FailureMode: FailureClosed},
		{Name: "partner", Rate: tb(50, time.Second, 200), FailureMode: FailureOpen, ShadowMode: true},
		{Name: "hourly", Rate: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 3600, Period: time.Hour}},
	}
	for _, want := range tests {
		got, ok := c.Policy(want.Name)
		if !ok || got != want {
			t.Errorf("Policy(%q) = %+v, %v; want %+v", want.Name, got, ok, want)
		}
	}
	if _, ok := c.Policy("enterprise"); ok {
		t.Error("Policy(enterprise) found, want not found")
	}
	if got := len(c.Policies()); got != len(tests) {
		t.Errorf("Policies() has %d, want %d", got, len(tests))
	}
	if len(c.Domains()) != 0 {
		t.Errorf("a policies-only file has domains %v", c.Domains())
	}
}

var wantLine = regexp.MustCompile(`^# want: (\d+):(\d+): (.*)$`)

// TestInvalid parses every file in testdata/invalid; each starts with
// "# want: LINE:COLUMN: message" naming the first error.
func TestInvalid(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) < 30 {
		t.Fatalf("Glob: %v, %d files", err, len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			m := wantLine.FindStringSubmatch(first)
			if m == nil {
				t.Fatalf("first line %q is not a want comment", first)
			}
			line, _ := strconv.Atoi(m[1])
			col, _ := strconv.Atoi(m[2])
			c, err := Parse(f, data)
			if err == nil {
				t.Fatalf("Parse succeeded with %v, want error %q", c.Domains(), m[3])
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *Error", err, err)
			}
			if ce.File != f || ce.Line != line || ce.Column != col || !strings.Contains(ce.Msg, m[3]) {
				t.Errorf("error = %s:%d:%d: %s\nwant    %s:%d:%d: %s", ce.File, ce.Line, ce.Column, ce.Msg, f, line, col, m[3])
			}
			prefix := f + ":" + m[1] + ":" + m[2] + ": "
			switch {
			case line == 0:
				prefix = f + ": "
			case col == 0:
				prefix = f + ":" + m[1] + ": "
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("message %q does not start with %q", err.Error(), prefix)
			}
		})
	}
}

func TestAllErrorsReported(t *testing.T) {
	_, err := Parse("x.yaml", []byte(`domain: d
descriptors:
  - key: a
    rate_limit: {unit: fortnight, requests_per_unit: 1}
  - key: b
    bogus: 1
  - key: c
    rate_limit: {unit: second, requests_per_unit: 1, burst: 5}
`))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %v is not an ErrorList", err)
	}
	want := []string{
		`x.yaml:4:24: invalid rate limit unit "fortnight"`,
		`x.yaml:6:5: unknown key "bogus" in a descriptor`,
		`x.yaml:8:61: burst applies only to token_bucket`,
	}
	if len(list) != len(want) {
		t.Fatalf("got %d errors:\n%v\nwant %d", len(list), err, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(list[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, list[i].Error(), w)
		}
	}
}

func TestLoadFolder(t *testing.T) {
	c := mustLoad(t, "testdata/valid")
	if got, want := c.Domains(), []string{"anchors", "api"}; !slices.Equal(got, want) {
		t.Errorf("Domains() = %v, want %v (hidden and non-YAML files skipped)", got, want)
	}
	var base []string
	for _, f := range c.Files() {
		base = append(base, filepath.Base(f))
	}
	if want := []string{"anchors.yml", "api.yaml", "tiers.yaml"}; !slices.Equal(base, want) {
		t.Errorf("Files() = %v, want %v", base, want)
	}
	if _, ok := c.Policy("login"); !ok {
		t.Error("policy login from tiers.yaml missing")
	}
	if !c.HasDomain("api") || c.HasDomain("hidden") {
		t.Errorf("HasDomain(api)=%v HasDomain(hidden)=%v", c.HasDomain("api"), c.HasDomain("hidden"))
	}
	a, b := one(t, c, "anchors", e("a", "x")...), one(t, c, "anchors", e("b", "y")...)
	if a.Rate != b.Rate || a.Rate.Requests != 60 || a.ID == b.ID {
		t.Errorf("aliased limits: a=%+v b=%+v ids %q %q", a.Rate, b.Rate, a.ID, b.ID)
	}
	// Numbers as values are text, as in the reference.
	one(t, c, "anchors", e("c", "123")...)
	one(t, c, "anchors", e("d", "456")...)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadFolderErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"duplicate domain", map[string]string{
			"a.yaml": "domain: d\n",
			"b.yaml": "# second\ndomain: d\n",
		}, `b.yaml:2:9: duplicate domain "d": already defined at `},
		{"duplicate policy", map[string]string{
			"a.yaml": "policies:\n  p: {requests_per_min: 1}\n",
			"b.yaml": "domain: d\npolicies:\n  p: {requests_per_min: 2}\n",
		}, `b.yaml:3:3: duplicate policy "p": already defined at `},
		{"empty folder", map[string]string{"notes.txt": "x"}, "no *.yaml or *.yml files in this folder"},
		{"error in second file", map[string]string{
			"a.yaml": "domain: a\n",
			"b.yml":  "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: eon, requests_per_unit: 1}\n",
		}, `b.yml:4:24: invalid rate limit unit "eon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			_, err := Load(dir, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
				t.Errorf("Load = %v, want an ErrInvalid containing %q", err, tt.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
}

// kubeMount lays out dir the way the kubelet mounts a ConfigMap: the data in
// a timestamped hidden folder, "..data" pointing at it, and each key a
// symlink through "..data".
func kubeMount(t *testing.T, dir, stamp string, files map[string]string) {
	t.Helper()
	data := filepath.Join(dir, stamp)
	writeFiles(t, data, files)
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(stamp, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadKubernetesMount(t *testing.T) {
	dir := t.TempDir()
	kubeMount(t, dir, "..2026_01_01_00_00_00.000000001", map[string]string{
		"rules.yaml":    "domain: k8s\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 3}\n",
		"policies.yaml": "policies:\n  p: {requests_per_min: 1}\n",
	})
	c := mustLoad(t, dir)
	if got := c.Domains(); !slices.Equal(got, []string{"k8s"}) {
		t.Errorf("Domains() = %v, want [k8s] (the ..data folders are not read twice)", got)
	}
	if len(c.Files()) != 2 {
		t.Errorf("Files() = %v, want 2 files", c.Files())
	}
}

func TestLimitIDsUnique(t *testing.T) {
	c := mustLoad(t, "testdata/envoy")
	seen := map[string]bool{}
	for _, l := range c.Limits() {
		if seen[l.ID] {
			t.Errorf("ID %q used twice", l.ID)
		}
		seen[l.ID] = true
	}
	if len(seen) < 20 {
		t.Errorf("only %d limits", len(seen))
	}
	// IDs quote their parts, so keys and values holding separators cannot
	// collide.
	c = mustParse(t, `domain: d
descriptors:
  - key: a
    value: "1\"/\"b"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    value: "1"
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
`)
	x, y := one(t, c, "d", e("a", `1"/"b`)...), one(t, c, "d", e("a", "1", "b", "")...)
	if x.ID == y.ID {
		t.Errorf("distinct rules share ID %q", x.ID)
	}
}

func TestDigest(t *testing.T) {
	a := mustParse(t, "domain: d\n")
	b := mustParse(t, "domain: d\n")
	c := mustParse(t, "domain: e\n")
	if a.Digest() != b.Digest() || a.Digest() == c.Digest() || len(a.Digest()) != 64 {
		t.Errorf("digests %q %q %q", a.Digest(), b.Digest(), c.Digest())
	}
}

func TestNilConfig(t *testing.T) {
	var c *Set
	if c.Match("d", e("k", "v")) != nil || c.HasDomain("d") || c.Domains() != nil || c.Files() != nil {
		t.Error("a nil Set must match nothing")
	}
	if _, ok := c.Policy("p"); ok {
		t.Error("a nil Set has no policies")
	}
}
