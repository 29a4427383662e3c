package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestReferenceFolderAsLoaded: started from the reference's environment,
// floodgate reads its config folder as the reference does: a file in a
// sub-folder and a file without an extension are loaded and enforced
// (names starting with '.' are not read); an empty folder starts a server
// with no rules, which says so in a warning and on /readyz.
func TestReferenceFolderAsLoaded(t *testing.T) {
	rule := func(domain string) string {
		return "domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
	}
	env := referenceEnv(t, map[string]string{"a.yaml": rule("a"), "rules": rule("d")}, map[string]string{"BACKEND_TYPE": "memory"})
	dir := filepath.Join(env["RUNTIME_ROOT"], "ratelimit", "config")
	for name, text := range map[string]string{"sub/b.yaml": rule("b"), ".editor/x.yaml": "not: [yaml"} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := startAsReference(t, env)
	c := rlsClient(t, p.GRPCAddr)
	for _, domain := range []string{"a", "b", "d"} {
		var codes []string
		for range 2 {
			resp, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: 1,
				Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("k", "v")}})
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, resp.GetOverallCode().String())
		}
		if codes[0] != "OK" || codes[1] != "OVER_LIMIT" {
			t.Errorf("domain %s, 1 an hour: %q, want OK then OVER_LIMIT (its file loaded)", domain, codes)
		}
	}

	empty := startAsReference(t, referenceEnv(t, nil, map[string]string{"BACKEND_TYPE": "memory"}))
	if !empty.logs.Contains("config folder has no files") {
		t.Errorf("no warning that the folder is empty:\n%s", empty.logs)
	}
	if code, body := httpGet(t, empty, "/readyz"); code != 200 || !strings.Contains(body, "no rules loaded") {
		t.Errorf("/readyz with no rules: %d %q, want 200 saying no rules are loaded", code, body)
	}
	resp, err := rlsClient(t, empty.GRPCAddr).ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "a", HitsAddend: 1,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("k", "v")}})
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Errorf("a request with no rules: %v %v, want OK", resp, err)
	}
}
