package e2e

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/floodgate/floodgate/internal/redistest"
)

// recordAt, when set, is the gRPC address of another Envoy rate-limit
// service (the reference, started with referenceDiffEnv and diffRules) to
// run the differential table against: the test then prints what it
// answers, in the table's form, instead of checking floodgate.
var recordAt = flag.String("diff.record", "", "run TestReferenceDifferential's table (or -diff.table's) against this address and print the answers")

// recordTable is the table -diff.record runs: one of diffTables by name,
// or migration (migrationCases, on the reference's example folder).
var recordTable = flag.String("diff.table", "diff", "the table -diff.record (or -diff.write) takes: diff, meta, quota, merge or migration")

// writeAt, when set, is a folder to write a table's config files into,
// laid out as the reference's runtime (DIR/ratelimit/config/), and its
// reference variables to print, to start the reference on.
var writeAt = flag.String("diff.write", "", "write -diff.table's config folder under this RUNTIME_ROOT and print its variables")

// diffTable is a table of sequences with the rules and reference
// variables (beyond the runtime folder and ports) it runs on.
type diffTable struct {
	name  string
	files map[string]string
	env   map[string]string
	cases []diffCase
}

// diffTables are the differential tables.
var diffTables = []diffTable{
	{"diff", map[string]string{"diff.yaml": diffRules}, referenceDiffEnv, diffCases},
	{"meta", map[string]string{"meta.yaml": metaRules}, metaEnv, metaCases},
	{"quota", map[string]string{"quota.yaml": quotaRules}, quotaEnv, quotaCases},
	{"merge", mergeFiles, mergeEnv, mergeCases},
}

// diffRules are the limits of the differential test, in the reference's
// own format. Hours and days: a sequence never straddles a window.
const diffRules = `domain: diff
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: user
    value: vip
    rate_limit: {name: vip, unit: hour, requests_per_unit: 5}
  - key: user
    value: free
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: route
    value: /v1/*/items
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: shared
    value: s*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: internal
    rate_limit: {unlimited: true}
  - key: ban
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: plan
    value: basic
    rate_limit: {name: basic_plan, unit: hour, requests_per_unit: 2}
  - key: plan
    value: premium
    rate_limit: {unit: hour, requests_per_unit: 4, replaces: [{name: basic_plan}]}
  - key: daily
    rate_limit: {unit: day, requests_per_unit: 2}
`

// referenceDiffEnv are the reference variables of the differential test
// beyond the runtime folder and ports: its response headers on.
var referenceDiffEnv = map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true"}

func dHits(n uint32, kv ...string) diffDesc { return diffDesc{kv: kv, hits: &n} }

func dLimit(rpu uint32, unit typev3.RateLimitUnit, kv ...string) diffDesc {
	return diffDesc{kv: kv, rpu: rpu, unit: unit}
}

// shadowWhy and lookWhy are why floodgate answers two steps otherwise.
const (
	shadowWhy = "a shadow limit never shapes a status's numbers or the headers: only the limits that decide do"
	lookWhy   = "a 0-hit check answers as a 1-hit check would, without charging: it denies when the next unit would not fit (the reference says OK with nothing left)"
)

// long is a descriptor value far above floodgate's own API bound.
var long = strings.Repeat("x", 5000)

// diffCases are the sequences, each on values of its own.
var diffCases = []diffCase{
	{name: "key only", steps: []diffStep{
		step(1, "OK | OK 3/hour rem=2 ; RateLimit-Limit=3 ; RateLimit-Remaining=2 ; RateLimit-Reset=*", d("user", "u1")),
		step(1, "OK | OK 3/hour rem=1 ; RateLimit-Limit=3 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("user", "u1")),
		step(1, "OK | OK 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "u1")),
		step(1, "OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "u1")),
	}},
	{name: "exact value over key only", steps: []diffStep{
		step(1, "OK | OK 5/hour \"vip\" rem=4 ; RateLimit-Limit=5 ; RateLimit-Remaining=4 ; RateLimit-Reset=*", d("user", "vip")),
		step(4, "OK | OK 5/hour \"vip\" rem=0 ; RateLimit-Limit=5 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "vip")),
		step(1, "OVER | OVER 5/hour \"vip\" rem=0 ; RateLimit-Limit=5 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "vip")),
	}},
	{name: "value without a limit", steps: []diffStep{step(1, "OK | OK rem=0", d("user", "free"))}},
	{name: "no match", steps: []diffStep{step(1, "OK | OK rem=0", d("nosuch", "x"))}},
	{name: "unknown domain", domain: "nosuch", steps: []diffStep{step(1, "OK | OK rem=0", d("user", "u1"))}},
	{name: "trailing wildcard counts each value", steps: []diffStep{
		step(1, "OK | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("path", "/api/a")),
		step(1, "OK | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("path", "/api/b")),
		step(1, "OK | OK 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("path", "/api/a")),
		step(1, "OVER | OVER 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("path", "/api/a")),
		step(1, "OK | OK rem=0", d("path", "/other")),
	}},
	{name: "middle wildcard", steps: []diffStep{
		step(1, "OK | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("route", "/v1/x/items")),
		step(1, "OK | OK 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("route", "/v1/x/items")),
		step(1, "OVER | OVER 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("route", "/v1/x/items")),
		step(1, "OK | OK rem=0", d("route", "/v1/x/other")),
	}},
	{name: "share_threshold shares one counter", steps: []diffStep{
		step(1, "OK | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("shared", "s1")),
		step(1, "OK | OK 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("shared", "s2")),
		step(1, "OVER | OVER 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("shared", "s3")),
	}},
	{name: "nesting", steps: []diffStep{
		step(1, "OK | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("tenant", "acme", "user", "n1")),
		step(1, "OK | OK 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("tenant", "acme", "user", "n1")),
		step(1, "OVER | OVER 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("tenant", "acme", "user", "n1")),
		step(1, "OK | OK rem=0", d("tenant", "acme")),
		step(1, "OK | OK rem=0", d("tenant", "other", "user", "n1")),
	}},
	{name: "hits_addend 0 looks", steps: []diffStep{
		step(0, "OK | OK 3/hour rem=3 ; RateLimit-Limit=3 ; RateLimit-Remaining=3 ; RateLimit-Reset=*", dHits(0, "user", "h0")),
		step(1, "OK | OK 3/hour rem=2 ; RateLimit-Limit=3 ; RateLimit-Remaining=2 ; RateLimit-Reset=*", d("user", "h0")),
		step(0, "OK | OK 3/hour rem=2 ; RateLimit-Limit=3 ; RateLimit-Remaining=2 ; RateLimit-Reset=*", dHits(0, "user", "h0")),
	}},
	{name: "hits_addend N", steps: []diffStep{
		step(2, "OK | OK 3/hour rem=1 ; RateLimit-Limit=3 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("user", "hn")),
		step(2, "OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "hn")),
		step(0, "OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", dHits(0, "user", "hn")),
	}},
	{name: "hits_addend huge", steps: []diffStep{
		step(4294967295, "OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "hh")),
		step(1, "OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "hh")),
	}},
	{name: "descriptor hits_addend over the request's", steps: []diffStep{
		step(1, "OK | OK 3/hour rem=0 | OK 3/hour rem=2 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", dHits(3, "user", "dh"), d("user", "dh2")),
		step(1, "OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "dh")),
	}},
	{name: "limit override", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", dLimit(1, typev3.RateLimitUnit_HOUR, "user", "lo")),
		step(1, "OVER | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", dLimit(1, typev3.RateLimitUnit_HOUR, "user", "lo")),
		step(1, "OK | OK 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "lo")),
	}},
	{name: "limit override without a rule", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", dLimit(1, typev3.RateLimitUnit_HOUR, "nosuch", "lo")),
		step(1, "OVER | OVER 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", dLimit(1, typev3.RateLimitUnit_HOUR, "nosuch", "lo")),
	}},
	{name: "shadow mode", steps: []diffStep{
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("shadow", "x")).
			but("OK | OK rem=0", shadowWhy),
		step(1, "OK | OK 1/hour rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("shadow", "x")).
			but("OK | OK rem=0", shadowWhy),
	}},
	{name: "unlimited", steps: []diffStep{
		step(1, "OK | OK rem=4294967295", d("internal", "x")),
		step(1, "OK | OK rem=4294967295 | OK 3/hour rem=2 ; RateLimit-Limit=3 ; RateLimit-Remaining=2 ; RateLimit-Reset=*", d("internal", "x"), d("user", "un")),
	}},
	{name: "ban", steps: []diffStep{step(1, "OVER | OVER 0/hour rem=0 ; RateLimit-Limit=0 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("ban", "x"))}},
	{name: "replaces", steps: []diffStep{
		step(1, "OK | OK rem=0 | OK 4/hour rem=3 ; RateLimit-Limit=4 ; RateLimit-Remaining=3 ; RateLimit-Reset=*", d("plan", "basic"), d("plan", "premium")),
		step(1, "OK | OK 2/hour \"basic_plan\" rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("plan", "basic")),
	}},
	{name: "several descriptors, one over", steps: []diffStep{
		step(3, "OK | OK 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "m1")),
		step(1, "OVER | OVER 3/hour rem=0 | OK 3/hour rem=2 | OK 2/day rem=1 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "m1"), d("user", "m2"), d("daily", "m")),
		step(1, "OK | OK 3/hour rem=1 ; RateLimit-Limit=3 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("user", "m2")),
	}},
	{name: "day unit", steps: []diffStep{
		step(1, "OK | OK 2/day rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("daily", "x")),
		step(2, "OVER | OVER 2/day rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("daily", "x")),
	}},
	{name: "oversized values are limited", steps: []diffStep{
		step(1, "OK | OK 3/hour rem=2 ; RateLimit-Limit=3 ; RateLimit-Remaining=2 ; RateLimit-Reset=*", d("user", long)),
		step(2, "OK | OK 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", long)),
		step(1, "OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", long)),
		step(1, "OK | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("path", "/api/"+long)),
		step(2, "OVER | OVER 2/hour rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("path", "/api/"+long)),
	}},
	{name: "check then charge", steps: []diffStep{
		step(0, "OK | OK 3/hour rem=3 ; RateLimit-Limit=3 ; RateLimit-Remaining=3 ; RateLimit-Reset=*", dHits(0, "user", "cc")),
		step(3, "OK | OK 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "cc")),
		step(0, "OK | OK 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", dHits(0, "user", "cc")).
			but("OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", lookWhy),
		step(1, "OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("user", "cc")),
		step(0, "OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", dHits(0, "user", "cc")),
	}},
}

// TestReferenceDifferential: the binary, started only with the
// reference's environment variables (RUNTIME_ROOT and the rest) on the
// embedded store and on Redis, answers every sequence of every table in
// diffTables as the reference answered it.
func TestReferenceDifferential(t *testing.T) {
	backends := []struct {
		name string
		env  func(t *testing.T) map[string]string
	}{
		{"embedded", func(t *testing.T) map[string]string { return map[string]string{"BACKEND_TYPE": "memory"} }},
		{"redis", func(t *testing.T) map[string]string {
			r := redistest.StartServer(t)
			// Room for a busy machine: the answers compared are the Redis
			// server's, never a failure mode's.
			return map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": r.Addr(), "REDIS_TIMEOUT": "5s"}
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, tb := range diffTables {
				t.Run(tb.name, func(t *testing.T) {
					extra := b.env(t)
					maps.Copy(extra, tb.env)
					p := startAsReference(t, referenceEnv(t, tb.files, extra))
					waitOutHourEdge()
					checkDiff(t, runDiff(t, rlsClient(t, p.GRPCAddr), tb.cases), tb.cases)
				})
			}
		})
	}
}

// checkDiff compares the answers got (by case and step) with the table.
func checkDiff(t *testing.T, got [][]string, cases []diffCase) {
	t.Helper()
	for i, c := range cases {
		for j, s := range c.steps {
			if got[i][j] != s.expected() {
				t.Errorf("%s, call %d %s:\n got  %s\n want %s\n (the reference: %s)", c.name, j+1, describe(c.request(s)), got[i][j], s.expected(), s.want)
			}
		}
	}
}

// TestReferenceRecord is a tool, not a test. With -diff.write DIR it
// writes a table's config folder (-diff.table: diff, the default, meta,
// quota, merge or migration) under DIR as the reference's runtime and prints
// the table's reference variables; with -diff.record ADDR it runs the
// table against another Envoy rate-limit service, the reference started
// on that folder with those variables, and prints its answers in the
// table's form, to write down as the expected values. Without either it
// is skipped.
func TestReferenceRecord(t *testing.T) {
	if *recordAt == "" && *writeAt == "" {
		t.Skip("a tool: run with -diff.record ADDR to print another server's answers")
	}
	var tb diffTable
	for _, c := range diffTables {
		if c.name == *recordTable {
			tb = c
		}
	}
	if *recordTable == "migration" {
		tb = diffTable{"migration", readFolder(t, migrationFolder), migrationEnv("REDIS"), migrationCases}
	}
	if tb.name == "" {
		t.Fatalf("no table %q", *recordTable)
	}
	if *writeAt != "" {
		dir := filepath.Join(*writeAt, "ratelimit", "config")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range tb.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(tb.env)) {
			fmt.Printf("%s=%s\n", k, tb.env[k])
		}
		return
	}
	waitOutEdge(time.Minute) // and so the hour's and day's
	got := runDiff(t, rlsClient(t, *recordAt), tb.cases)
	for i, c := range tb.cases {
		fmt.Printf("%q:\n", c.name)
		for _, a := range got[i] {
			fmt.Printf("\t%q,\n", a)
		}
	}
}
