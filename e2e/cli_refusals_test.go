package e2e

import (
	"strings"
	"testing"
)

// TestZoneFromHostFilesRefused: a calendar time_zone naming a file of the
// host's zone directory rather than an IANA zone (localtime, posixrules,
// ./UTC: the host's own zone, exactly what Local is refused for) is
// refused by `floodgate config validate` and by `floodgate serve`, naming
// the file, line and field; an IANA name passes both.
func TestZoneFromHostFilesRefused(t *testing.T) {
	rulesWith := func(zone string) string {
		return writeRules(t, "domain: z\npolicies:\n  q: {algorithm: fixed_window, requests: 3, period: calendar_day, time_zone: \""+zone+"\"}\n")
	}
	for _, zone := range []string{"localtime", "posixrules", "./UTC", "Local"} {
		path := rulesWith(zone)
		want := path + ":3:"
		_, stderr, code := runCLI(t, "config", "validate", path)
		if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, `time_zone: unknown time zone "`+zone+`"`) {
			t.Errorf("config validate with time_zone %q: exit %d, stderr %q; want exit 1 naming %s and the zone", zone, code, stderr, want)
		}
		_, stderr, code = runCLI(t, "serve", "--config", path, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
		if code == 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, `time_zone: unknown time zone "`+zone+`"`) { // as plainly as config validate
			t.Errorf("serve with time_zone %q: exit %d, stderr %q; want a refusal naming %s and the zone", zone, code, stderr, want)
		}
	}
	if stdout, stderr, code := runCLI(t, "config", "validate", rulesWith("Asia/Almaty")); code != 0 || !strings.HasPrefix(stdout, "ok:") {
		t.Errorf("config validate with time_zone Asia/Almaty: exit %d, %q %q; want ok", code, stdout, stderr)
	}
	startServe(t, "--config", rulesWith("Asia/Almaty"))
}

// TestBenchRLSWithoutTheBenchRules: `floodgate bench --api rls` against a
// binary serving no rule for the bench descriptors (every answer OK with
// no limit) warns that it measured rule lookups, and exits 1 under
// --strict; against a binary serving the rules of --print-config it
// does neither.
func TestBenchRLSWithoutTheBenchRules(t *testing.T) {
	rules, stderr, code := runCLI(t, "bench", "--api", "rls", "--print-config", "--limit", "1000000000/1s")
	if code != 0 {
		t.Fatalf("bench --print-config: exit %d, %s", code, stderr)
	}
	bare := startServe(t)
	withRules := startServe(t, "--config", writeRules(t, rules))
	run := func(p *proc, strict bool) (string, int) {
		args := []string{"bench", "--api", "rls", "--addr", p.GRPCAddr, "--duration", "0", "--max-requests", "200", "--warmup", "0s", "--concurrency", "2", "--json"}
		if strict {
			args = append(args, "--strict")
		}
		_, stderr, code := runCLI(t, args...)
		return stderr, code
	}
	for _, strict := range []bool{false, true} {
		stderr, code := run(bare, strict)
		if wantCode := map[bool]int{false: 0, true: 1}[strict]; code != wantCode || !strings.Contains(stderr, "none of 200 answers carried a limit") || !strings.Contains(stderr, "--print-config") {
			t.Errorf("bench (strict %v) against a server without the rules: exit %d, stderr %q; want exit %d and the warning naming the fix", strict, code, stderr, wantCode)
		}
	}
	if stderr, code := run(withRules, true); code != 0 || strings.Contains(stderr, "carried a limit") {
		t.Errorf("bench --strict against the bench rules: exit %d, stderr %q; want 0, no warning", code, stderr)
	}
}
