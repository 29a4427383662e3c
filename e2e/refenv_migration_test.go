package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// migrationFolder is the reference's example config folder
// (examples/ratelimit/config, copied unchanged): a file with a leading
// document marker, nesting, replaces (one naming a limit of no rule), a
// ban, shadow mode, unlimited, detailed_metric, and two quota-mode rules
// with metadata for quota-based service selection.
const migrationFolder = "testdata/refexample"

// readFolder reads every file of dir into a name -> content map.
func readFolder(t testing.TB, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

// migrationEnv is a Kubernetes Deployment's environment for the
// reference (its docker-compose example's, plus response headers and the
// pool size, and the dynamic metadata quota-based service selection
// reads), on a Redis at redisAddr; LOG_FORMAT json and free ports for
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
		"RESPONSE_DYNAMIC_METADATA":      "true",
		"DEBUG_PORT":                     "6070",
	}
}

// migrationCases are calls on the example folder, with the reference's
// answers (see answerString; the limits here have no names).
var migrationCases = []diffCase{
	{name: "database", domain: "mongo_cps", steps: []diffStep{
		step(1, "OK | OK 500/second rem=499 ; RateLimit-Limit=500 ; RateLimit-Remaining=499 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"database=users\"]}],\"domain\":\"mongo_cps\",\"hitsAddend\":1}", d("database", "users")),
	}},
	{name: "nested exact", domain: "rl", steps: []diffStep{
		step(1, "OK | OK 1/minute rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"source_cluster=proxy\",\"destination_cluster=mock\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("source_cluster", "proxy", "destination_cluster", "mock")),
		step(1, "OVER | OVER 1/minute rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"source_cluster=proxy\",\"destination_cluster=mock\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("source_cluster", "proxy", "destination_cluster", "mock")),
	}},
	{name: "key only and nested", domain: "rl", steps: []diffStep{
		step(1, "OK | OK 2/minute rem=1 | OK 3/minute rem=2 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"foo=f1\"]},{\"entries\":[\"foo=f1\",\"bar=b1\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("foo", "f1"), d("foo", "f1", "bar", "b1")),
		step(2, "OK | OK 3/minute rem=0 ; RateLimit-Limit=3 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"foo=f1\",\"bar=b1\"]}],\"domain\":\"rl\",\"hitsAddend\":2}", d("foo", "f1", "bar", "b1")),
		step(1, "OK | OK 2/minute rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"foo=f1\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("foo", "f1")),
	}},
	{name: "replaces", domain: "rl", steps: []diffStep{
		step(1, "OK | OK 4/minute rem=3 | OK rem=0 | OK rem=0 ; RateLimit-Limit=4 ; RateLimit-Remaining=3 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"category=account\"]},{\"entries\":[\"foo=f2\",\"bar=bkthomps\"]},{\"entries\":[\"source_cluster=proxy\",\"destination_cluster=fake\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("category", "account"), d("foo", "f2", "bar", "bkthomps"), d("source_cluster", "proxy", "destination_cluster", "fake")),
		step(1, "OK | OK 1/minute \"bkthomps\" rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"foo=f2\",\"bar=bkthomps\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("foo", "f2", "bar", "bkthomps")),
		step(1, "OVER | OVER 1/minute \"bkthomps\" rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"foo=f2\",\"bar=bkthomps\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("foo", "f2", "bar", "bkthomps")),
	}},
	{name: "ban and its replacement", domain: "rl", steps: []diffStep{
		step(1, "OVER | OVER 0/minute \"banned_limit\" rem=0 ; RateLimit-Limit=0 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"foo=f3\",\"bar=banned\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("foo", "f3", "bar", "banned")),
		step(1, "OK | OK 2/minute rem=1 | OK rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=1 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"source_cluster=proxy\",\"destination_cluster=override\"]},{\"entries\":[\"foo=f3\",\"bar=banned\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("source_cluster", "proxy", "destination_cluster", "override"), d("foo", "f3", "bar", "banned")),
	}},
	{name: "unlimited", domain: "rl", steps: []diffStep{
		step(1, "OK | OK rem=4294967295 ; meta={\"descriptors\":[{\"entries\":[\"foo=f4\",\"bay=x\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("foo", "f4", "bay", "x")),
		step(1, "OK | OK rem=4294967295 ; meta={\"descriptors\":[{\"entries\":[\"qux=x\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("qux", "x")),
	}},
	{name: "quota-based service selection", domain: "rl", steps: []diffStep{
		step(1, "OK | OK 1/minute rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"service=service_1\"]}],\"domain\":\"rl\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"name\":\"service_1\"}}}", d("service", "service_1")),
		step(1, "OVER | OVER 1/minute rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"service=service_1\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("service", "service_1")),
		step(1, "OK | OVER 1/minute rem=0 | OK 2/minute rem=1 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"service=service_1\"]},{\"entries\":[\"service=service_2\"]}],\"domain\":\"rl\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"name\":\"service_2\"}}}", d("service", "service_1"), d("service", "service_2")),
		step(1, "OK | OVER 1/minute rem=0 | OK 2/minute rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"service=service_1\"]},{\"entries\":[\"service=service_2\"]}],\"domain\":\"rl\",\"hitsAddend\":1,\"metadata\":{\"service_with_quota\":{\"name\":\"service_2\"}}}", d("service", "service_1"), d("service", "service_2")),
		step(1, "OVER | OVER 1/minute rem=0 | OVER 2/minute rem=0 ; RateLimit-Limit=1 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"service=service_1\"]},{\"entries\":[\"service=service_2\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("service", "service_1"), d("service", "service_2")),
	}},
	{name: "quota beside a normal limit", domain: "rl", steps: []diffStep{
		step(1, "OVER | OVER 2/minute rem=0 | OK 2/minute rem=1 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"service=service_2\"]},{\"entries\":[\"unspec=u1\"]}],\"domain\":\"rl\",\"hitsAddend\":1}", d("service", "service_2"), d("unspec", "u1")),
		step(2, "OVER | OVER 2/minute rem=0 ; RateLimit-Limit=2 ; RateLimit-Remaining=0 ; RateLimit-Reset=* ; meta={\"descriptors\":[{\"entries\":[\"unspec=u1\"]}],\"domain\":\"rl\",\"hitsAddend\":2}", d("unspec", "u1")),
	}},
}

// TestReferenceMigration: a team swaps the reference's image for
// floodgate's and changes nothing else: the Deployment's environment and
// its config folder. floodgate says it reads the reference environment,
// names the variables it ignores, decides on the Redis of REDIS_URL, and
// answers with the reference's three headers.
func TestReferenceMigration(t *testing.T) {
	r := redistest.StartServer(t)
	p := startAsReference(t, referenceEnv(t, readFolder(t, migrationFolder), migrationEnv(r.Addr())))

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

	waitOutEdge(time.Minute)
	got := runDiff(t, rlsClient(t, p.GRPCAddr), migrationCases)
	for i, c := range migrationCases {
		for j, s := range c.steps {
			if got[i][j] != s.expected() {
				t.Errorf("%s, call %d %s:\n got  %s\n want %s\n (the reference: %s)", c.name, j+1, describe(c.request(s)), got[i][j], s.expected(), s.want)
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
