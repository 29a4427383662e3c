package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// migrationFiles are an example config folder like the reference's
// (examples/ratelimit/config: one file with a leading document marker,
// one with nesting, replaces, a ban, shadow mode, unlimited and
// detailed_metric), in its format.
var migrationFiles = map[string]string{
	"config.yaml": `---
domain: db_qps
descriptors:
  - key: table
    value: orders
    rate_limit: {unit: second, requests_per_unit: 400}
  - key: table
    value: default
    rate_limit: {unit: second, requests_per_unit: 400}
`,
	"example.yaml": `domain: edge
descriptors:
  - key: category
    value: billing
    rate_limit:
      replaces: [{name: per_user}]
      unit: hour
      requests_per_unit: 4
  - key: app
    rate_limit: {unit: hour, requests_per_unit: 2}
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 3}
      - key: user
        value: alice
        rate_limit: {name: per_user, unit: hour, requests_per_unit: 1}
      - key: user
        value: mallory
        rate_limit: {name: ban, unit: hour, requests_per_unit: 0}
      - key: region
        value: test
        shadow_mode: true
        rate_limit: {unit: hour, requests_per_unit: 1}
      - key: internal
        rate_limit: {unlimited: true}
  - key: tenant
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 2}
`,
}

// migrationEnv is a Kubernetes Deployment's environment for the
// reference (its docker-compose example's, plus response headers and the
// pool size), on a Redis at redisAddr; LOG_FORMAT json and free ports for
// the test.
func migrationEnv(redisAddr string) map[string]string {
	return map[string]string{
		"USE_STATSD":                     "true",
		"STATSD_HOST":                    "statsd",
		"STATSD_PORT":                    "9125",
		"LOG_LEVEL":                      "debug",
		"REDIS_SOCKET_TYPE":              "tcp",
		"REDIS_URL":                      redisAddr,
		"REDIS_POOL_SIZE":                "5",
		"RUNTIME_WATCH_ROOT":             "false",
		"CONFIG_TYPE":                    "FILE",
		"CONFIG_GRPC_XDS_NODE_ID":        "test-node-id",
		"LIMIT_RESPONSE_HEADERS_ENABLED": "true",
		"DEBUG_PORT":                     "6070",
	}
}

// migrationCases are calls on the example folder, with the reference's
// answers (see answerString; the limits here have no names).
var migrationCases = []diffCase{
	{name: "rows", domain: "db_qps", steps: []diffStep{
		step(1, "OK | OK 400/second rem=399 ; RateLimit-Limit=400 ; RateLimit-Remaining=399 ; RateLimit-Reset=*", d("table", "orders")),
	}},
	{name: "per user", domain: "edge", steps: []diffStep{
		step(1, "OK | OK 3/hour rem=2 ; RateLimit-Limit=3 ; RateLimit-Remaining=2 ; RateLimit-Reset=*", d("app", "web", "user", "bob")),
		step(2, "OK | OK 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("app", "web", "user", "bob")),
		step(1, "OVER | OVER 3/hour rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=*", d("app", "web", "user", "bob")),
	}},
	{name: "replaces", domain: "edge", steps: []diffStep{
		step(1, "OK | OK 4/hour rem=3 | OK rem=0 ; RateLimit-Limit=4 ; RateLimit-Remaining=3 ; RateLimit-Reset=*", d("category", "billing"), d("app", "web", "user", "alice")),
	}},
	{name: "top level only", domain: "edge", steps: []diffStep{
		step(1, "OK | OK 2/hour rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=*", d("app", "web")),
	}},
}

// TestReferenceMigration: a team swaps the reference's image for
// floodgate's and changes nothing else: the Deployment's environment and
// its config folder. floodgate says it reads the reference environment,
// names the variables it ignores, decides on the Redis of REDIS_URL, and
// answers with the reference's three headers.
func TestReferenceMigration(t *testing.T) {
	r := redistest.StartServer(t)
	p := startAsReference(t, referenceEnv(t, migrationFiles, migrationEnv(r.Addr())))

	if !p.logs.Contains("configured from envoyproxy/ratelimit's environment variables") {
		t.Errorf("no line says the reference environment is read:\n%s", p.logs)
	}
	ignored := logField(t, p, "reference environment: variables set but not supported, ignored", "variables")
	for _, name := range []string{"USE_STATSD (", "STATSD_HOST (", "STATSD_PORT (", "RUNTIME_WATCH_ROOT ("} {
		if !strings.Contains(ignored, name) {
			t.Errorf("the ignored variables %q do not name %s", ignored, strings.TrimSuffix(name, " ("))
		}
	}
	for _, name := range []string{"REDIS_URL", "LIMIT_RESPONSE_HEADERS_ENABLED", "CONFIG_TYPE", "REDIS_POOL_SIZE"} {
		if strings.Contains(ignored, name) {
			t.Errorf("%s is named ignored: %q", name, ignored)
		}
	}
	if store := logField(t, p, "serving", "store"); store != "redis-standalone" {
		t.Errorf("serving on store %q, want redis-standalone", store)
	}

	waitOutHourEdge()
	got := runDiff(t, rlsClient(t, p.GRPCAddr), migrationCases)
	for i, c := range migrationCases {
		for j, s := range c.steps {
			// The limit's name is the differential test's business.
			if got := limitName.ReplaceAllString(got[i][j], ""); got != s.want {
				t.Errorf("%s, call %d %s:\n got  %s\n want %s (the reference)", c.name, j+1, describe(c.request(s)), got, s.want)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := r.Client().DBSize(ctx).Result()
	if err != nil || keys == 0 {
		t.Errorf("Redis at REDIS_URL holds %d keys (%v): the decisions were not made there", keys, err)
	}
}

// limitName is a limit's name in an answerString.
var limitName = regexp.MustCompile(` "(?:[^"\\]|\\.)*"`)

// logField is the field of the first JSON log line with message msg.
func logField(t *testing.T, p *proc, msg, field string) string {
	t.Helper()
	for _, line := range strings.Split(p.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			return fmt.Sprint(rec[field])
		}
	}
	t.Errorf("no log line %q:\n%s", msg, p.logs)
	return ""
}
