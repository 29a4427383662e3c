package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store/redisstore"
)

// explainRules' line numbers are asserted below.
const explainRules = `domain: shop
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 5, name: login_per_user, failure_mode: closed, algorithm: sliding_window}
  - key: path
    value: /api/*
    share_threshold: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: token_bucket, burst: 150}
  - key: banned
    rate_limit: {unit: hour, requests_per_unit: 0}
quota_buckets:
  - bucket_id: {name: free}
    rate_limit: {unit: minute, requests_per_unit: 100}
  - bucket_id: {name: free, api_key: "*"}
    blanket_rule: deny_all
`

func writeExplainRules(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(path, []byte(explainRules), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runExplain(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"config", "explain"}, args...), func(string) string { return "" }, &out, &errOut)
	return out.String(), errOut.String(), err
}

// storeKey is the key the Envoy API would use for entries, built the way
// the server does, from the config itself.
func storeKey(t *testing.T, path string, entries ...rules.Entry) (string, *rules.Limit) {
	t.Helper()
	cfg, err := rules.Load(path, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Match("shop", entries)[0]
	return string(l.AppendKey(nil, entries)), l
}

func TestConfigExplainText(t *testing.T) {
	path := writeExplainRules(t)
	out, errOut, err := runExplain(t, "--config", path, "--domain", "shop",
		"--descriptor", "path=/login,user=bob", "--descriptor", "path=/login", "--descriptor", "banned=x",
		"--descriptor", "path=/api/items", "--bucket", "name=free,api_key=k1", "--redis-prefix", "rl:")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	key, l := storeKey(t, path, rules.Entry{Key: "path", Value: "/login"}, rules.Entry{Key: "user", Value: "bob"})
	redisKey := redisstore.KeyName("rl:", l.Rate.Algorithm, key)
	for _, want := range []string{
		`descriptor 1: path="/login", user="bob"`,
		"matches login_per_user at " + path + ":9:21",
		"path:         path=/login/user",
		"limit:        5 per 1m0s, sliding_window",
		"failure mode: closed",
		"shadow mode:  false",
		"store key:    " + strconv.Quote(key),
		"redis key:    " + strconv.Quote(redisKey),
		`descriptor 2: path="/login"`,
		"matches no rule: the Envoy API answers OK for it",
		"nearest: path=/login/user (login_per_user) at " + path + ":8:9",
		`- descriptor has 1 entry, rule needs 2 (add key "user" with any value)`,
		`- entry 1: value "/login" does not match "/api/*"`,
		"matches shop.banned at " + path + ":16:17",
		"0 per 1h0m0s (deny all)",
		"failure mode: default (the server's --failure-mode)",
		"the store is not asked",
		"limit:        100 per 1m0s, token_bucket, burst 150",
		"shadow mode:  true",
		"shadow mode: counted, but always answered OK",
		`bucket api_key="k1", name="free"`,
		"matches shop.quota.api_key_*.name_free at " + path + ":20:5: deny_all",
		"other: shop.quota.name_free at " + path + ":18:5",
		"matches, but shop.quota.api_key_*.name_free is more specific: 2 keys to this one's 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "store key:") != 2 { // login_per_user and the wildcard; not the deny-all rule
		t.Errorf("want 2 store keys:\n%s", out)
	}
	if !strings.HasPrefix(redisKey, "rl:sw:{") {
		t.Errorf("redis key %q ignores --redis-prefix", redisKey)
	}
}

func TestConfigExplainJSON(t *testing.T) {
	path := writeExplainRules(t)
	value := "10.0.0.1\x00\xff" // binary: not valid UTF-8
	out, errOut, err := runExplain(t, "--config", path, "--domain", "shop", "--json",
		"--descriptor", "remote_address="+value, "--descriptor", "user=bob", "--bucket", "name=paid")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var r explainReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if r.Domain != "shop" || r.RedisPrefix != "fg:" || len(r.Descriptors) != 2 || len(r.Buckets) != 1 {
		t.Fatalf("report %+v", r)
	}
	d := r.Descriptors[0]
	if !d.Matched || len(d.Rules) != 1 {
		t.Fatalf("descriptor 1: %+v", d)
	}
	m := d.Rules[0]
	key, l := storeKey(t, path, rules.Entry{Key: "remote_address", Value: value})
	got, err := strconv.Unquote(m.StoreKey)
	if err != nil || got != key {
		t.Errorf("store_key %s unquotes to %q (%v), want %q", m.StoreKey, got, err, key)
	}
	if want := redisstore.KeyName("fg:", l.Rate.Algorithm, key); m.RedisKey != want {
		t.Errorf("redis_key %q, want %q", m.RedisKey, want)
	}
	if m.Name != "shop.remote_address" || m.Source.File != path || m.Source.Line != 4 || m.Source.Column != 17 ||
		m.Algorithm != "fixed_window" || m.Requests != 10 || m.Period != "1s" || m.FailureMode != "default" || m.ShadowMode {
		t.Errorf("rule %+v", m)
	}
	d = r.Descriptors[1]
	if d.Matched || len(d.Rules) != 0 || len(d.Candidates) != 0 {
		t.Errorf("user=bob shares no first key with a rule: %+v", d)
	}
	b := r.Buckets[0]
	if b.Bucket != nil || b.Action != "allow_all" || len(b.Others) != 2 {
		t.Errorf("bucket %+v", b)
	}
	for _, o := range b.Others {
		if o.Matches || len(o.Reasons) == 0 || o.Source.Line == 0 {
			t.Errorf("other %+v", o)
		}
	}
}

func TestConfigExplainBadInput(t *testing.T) {
	path := writeExplainRules(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no such domain", []string{"--config", path, "--domain", "nope", "--descriptor", "a=b"}, `no domain "nope" in ` + path + ` (its domains: "shop")`},
		{"no equals", []string{"--config", path, "--domain", "shop", "--descriptor", "k"}, `--descriptor "k": entry 1 ("k") has no '=': want KEY=VALUE`},
		{"empty", []string{"--config", path, "--domain", "shop", "--descriptor", ""}, `--descriptor "": empty: want KEY=VALUE`},
		{"empty key", []string{"--config", path, "--domain", "shop", "--descriptor", "a=1,=2"}, `entry 2 ("=2") has an empty key`},
		{"no descriptor", []string{"--config", path, "--domain", "shop"}, "give at least one --descriptor"},
		{"no config", []string{"--domain", "shop", "--descriptor", "a=b"}, "--config is required"},
		{"no domain", []string{"--config", path, "--descriptor", "a=b"}, "--domain is required"},
		{"bucket key twice", []string{"--config", path, "--domain", "shop", "--bucket", "a=1,a=2"}, `key "a" given twice`},
		{"argument", []string{"--config", path, "--domain", "shop", "--descriptor", "a=b", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := runExplain(t, tc.args...)
			var ec exitCode
			if !errors.As(err, &ec) || ec != 2 {
				t.Fatalf("err %v, want exit 2", err)
			}
			if !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("stderr %q, want %q (stdout %q)", errOut, tc.want, out)
			}
		})
	}
	// A config that does not load is exit 1, with file:line.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("domain: shop\ndescriptors: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := runExplain(t, "--config", bad, "--domain", "shop", "--descriptor", "a=b")
	var ec exitCode
	if !errors.As(err, &ec) || ec != 1 || !strings.Contains(errOut, bad+":2:") {
		t.Errorf("bad config: err %v, stderr %q", err, errOut)
	}
}

// TestReadmeExplainExample: the "Why was this limited?" example of
// docs/operations.md is what the command prints for the shipped examples/rules, which make run
// serves.
func TestReadmeExplainExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join("..", ".."))
	out, errOut, err := runExplain(t, "--config", "examples/rules", "--domain", "shop", "--descriptor", "path=/login,user=bob", "--descriptor", "path=/login")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	example := "$ floodgate config explain --config examples/rules --domain shop --descriptor path=/login,user=bob --descriptor path=/login\n" + out
	if !strings.Contains(string(readme), example) {
		t.Errorf("docs/operations.md lacks the example as the command prints it:\n%s", example)
	}
}

// TestConfigExplainLeaky: a leaky_bucket rule is explained with its queue
// size and what Envoy gets of it.
func TestConfigExplainLeaky(t *testing.T) {
	path := filepath.Join(t.TempDir(), "partner.yaml")
	yaml := "domain: partner\ndescriptors:\n  - key: api\n    rate_limit: {unit: second, requests_per_unit: 20, algorithm: leaky_bucket, burst: 50}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runExplain(t, "--config", path, "--domain", "partner", "--descriptor", "api=acme")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	for _, want := range []string{
		"limit:        20 per 1s, leaky_bucket, burst 50 (through Envoy: admits only what may start now, no queue)",
		`redis key:    "fg:lb:{`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestConfigExplainCalendar: explain shows a calendar quota's period and
// time zone, in text and JSON.
func TestConfigExplainCalendar(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plans.yaml")
	if err := os.WriteFile(path, []byte(`domain: shop
descriptors:
  - key: plan
    rate_limit: {requests_per_unit: 10000, period: calendar_month, time_zone: Asia/Jakarta}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runExplain(t, "--config", path, "--domain", "shop", "--descriptor", "plan=starter")
	if err != nil || !strings.Contains(out, "limit:        10000 per calendar_month in Asia/Jakarta, fixed_window") {
		t.Fatalf("%v %s:\n%s", err, errOut, out)
	}
	out, errOut, err = runExplain(t, "--config", path, "--domain", "shop", "--descriptor", "plan=starter", "--json")
	if err != nil || !strings.Contains(out, `"period": "calendar_month"`) || !strings.Contains(out, `"time_zone": "Asia/Jakarta"`) {
		t.Fatalf("%v %s:\n%s", err, errOut, out)
	}
}

// TestConfigExplainChargeAfter: a stream-done descriptor (charge: after)
// shows its parent's limits, charged as debt under the parent's counter:
// the same store key as the request path's.
func TestConfigExplainChargeAfter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llm.yaml")
	if err := os.WriteFile(path, []byte(`domain: llm
descriptors:
  - key: tenant
    rate_limit: {name: tokens_per_minute, algorithm: token_bucket, unit: minute, requests_per_unit: 100000}
    descriptors:
      - key: usage
        value: actual
        charge: after
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runExplain(t, "--config", path, "--domain", "llm", "--descriptor", "tenant=a", "--descriptor", "tenant=a,usage=actual")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if n := strings.Count(out, "matches tokens_per_minute"); n != 2 {
		t.Errorf("tokens_per_minute matched %d times, want 2 (the request path and the stream done):\n%s", n, out)
	}
	if !strings.Contains(out, "charge: after: hits_addend charged as debt under the parent descriptor's counter") {
		t.Errorf("the decision of the charge: after descriptor is not explained:\n%s", out)
	}
	var storeKeys []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "store key:") {
			storeKeys = append(storeKeys, l)
		}
	}
	if len(storeKeys) != 2 || storeKeys[0] != storeKeys[1] {
		t.Errorf("store keys %q, want two equal ones (one counter)", storeKeys)
	}
}

// TestRuleCommandsMergeDomains: every command that reads rules takes the
// rule-loading flags alike: a folder whose two files define one domain
// loads in config validate and config explain with --merge-domains or
// $FLOODGATE_MERGE_DOMAINS, and neither loads it without.
func TestRuleCommandsMergeDomains(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"a.yaml": "domain: shop\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
		"b.yaml": "domain: shop\ndescriptors:\n  - key: path\n    rate_limit: {unit: minute, requests_per_unit: 7}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	commands := map[string][]string{
		"validate": {"config", "validate", dir},
		"explain":  {"config", "explain", "--config", dir, "--domain", "shop", "--descriptor", "path=/x"},
	}
	for name, args := range commands {
		for _, how := range []string{"flag", "env", "neither"} {
			t.Run(name+" "+how, func(t *testing.T) {
				env := map[string]string{}
				a := append([]string{}, args[:2]...)
				switch how {
				case "flag":
					a = append(a, "--merge-domains")
				case "env":
					env["FLOODGATE_MERGE_DOMAINS"] = "true"
				}
				a = append(a, args[2:]...)
				var out, errOut bytes.Buffer
				err := run(context.Background(), a, func(k string) string { return env[k] }, &out, &errOut)
				if how == "neither" {
					var ec exitCode
					if !errors.As(err, &ec) || ec != 1 || !strings.Contains(errOut.String(), "shop") {
						t.Errorf("without merging: %v %q, want exit 1 naming the domain defined twice", err, errOut.String())
					}
					return
				}
				if err != nil {
					t.Fatalf("%v: %s", err, errOut.String())
				}
				if name == "explain" && !strings.Contains(out.String(), "b.yaml") {
					t.Errorf("explain does not name the rule of b.yaml:\n%s", out.String())
				}
			})
		}
	}
}

// TestExplainWarning: a rule's warning threshold shows in the text (in
// units, as written) and in the JSON; a rule without one shows none.
func TestExplainWarning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.yaml")
	yaml := "domain: api\ndescriptors:\n  - key: partner\n    rate_limit: {unit: minute, requests_per_unit: 1000, warn_at: 80%}\n  - key: ip\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runExplain(t, "--config", path, "--domain", "api", "--descriptor", "partner=p1")
	if err != nil || !strings.Contains(out, "    warning at:   800 used (warn_at: 80%): an allowed answer from there carries RateLimit-Warning\n") {
		t.Fatalf("text: %v\n%s", err, out)
	}
	out, _, err = runExplain(t, "--config", path, "--domain", "api", "--descriptor", "ip=1")
	if err != nil || strings.Contains(out, "warning at") {
		t.Fatalf("a rule without warn_at: %v\n%s", err, out)
	}
	out, _, err = runExplain(t, "--config", path, "--domain", "api", "--descriptor", "partner=p1", "--json")
	if err != nil || !strings.Contains(out, `"warn_at": "80%",`) || !strings.Contains(out, `"warn_at_units": 800,`) {
		t.Fatalf("json: %v\n%s", err, out)
	}
}
