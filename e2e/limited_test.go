package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/metadata"

	"github.com/floodgate/floodgate/internal/limited"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "TestLimitedViews: write the admin page's screenshot to docs/img/admin-page.png")

const limitedRules = `
domain: shop
descriptors:
  - key: remote_address
    rate_limit: {name: per_ip, algorithm: fixed_window, unit: hour, requests_per_unit: 5}
`

// The attackers of TestLimitedViews: eight addresses and two values that
// are markup, which the page must show as text and never run.
var limitedAttackers = []string{
	"203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4",
	"203.0.113.5", "203.0.113.6", "203.0.113.7", "203.0.113.8",
	`<script>document.title='pwned'</script>`,
	`<img src=x onerror="document.title='pwned'">`,
}

// TestLimitedViews runs the binary under synthetic traffic, many distinct
// keys within their limit and ten attackers over theirs (each denied a
// different number of times), then reads who is limited three ways:
// GET /debug/limited, `floodgate top`, and the admin page in a headless
// Chromium. Each must list exactly the ten attackers on top, with their
// denied counts within 5% of the truth; the page must draw a chart and
// show the markup keys as text, running none of them.
func TestLimitedViews(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(cfg, []byte(limitedRules), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "--config", cfg, "--limited-keys", "64", "--limited-metrics-keys", "3")
	rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))
	ask := func(value string) *rlsv3.RateLimitResponse {
		resp, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "shop", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: value}}},
		}})
		if err != nil {
			t.Error(err)
			return nil
		}
		return resp
	}

	// The traffic: distinct keys, each within its limit, 16 times the
	// counters of --limited-keys, interleaved with the attackers' requests
	// (one each every 16 keys, until attacker i is denied 20+3i times).
	const distinct, every = 1024, 16
	truth := map[string]int{}
	jobs := make(chan string, 256)
	var wg sync.WaitGroup
	var mu sync.Mutex
	deniedSeen := map[string]int{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range jobs {
				if resp := ask(v); resp != nil && resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
					mu.Lock()
					deniedSeen[v]++
					mu.Unlock()
				}
			}
		}()
	}
	for i := range distinct {
		jobs <- fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
		if i%every == 0 {
			for a, v := range limitedAttackers {
				if truth[v] < 5+20+3*a {
					jobs <- v
					truth[v]++
				}
			}
		}
	}
	close(jobs)
	wg.Wait()
	for a, v := range limitedAttackers {
		if deniedSeen[v] != 20+3*a {
			t.Fatalf("%q denied %d times, want %d (the traffic is not what the test means)", v, deniedSeen[v], 20+3*a)
		}
	}
	checkTop := func(view string, r limited.Report) {
		t.Helper()
		if len(r.Rules) != 1 || r.Rules[0].Rule != "per_ip" {
			t.Fatalf("%s: rules %+v, want per_ip", view, r.Rules)
		}
		keys := r.Rules[0].Keys
		if len(keys) != len(limitedAttackers) {
			t.Fatalf("%s: %d keys, want %d", view, len(keys), len(limitedAttackers))
		}
		for rank, k := range keys {
			a := len(limitedAttackers) - 1 - rank
			want := "remote_address=" + limitedAttackers[a]
			if k.Key != want {
				t.Errorf("%s: rank %d is %q, want %q", view, rank, k.Key, want)
			}
			if got, w := float64(k.Denied.Total), float64(20+3*a); math.Abs(got-w) > 0.05*w {
				t.Errorf("%s: %s denied %v, want %v ±5%%", view, k.Key, got, w)
			}
		}
	}

	// GET /debug/limited.
	resp, err := http.Get("http://" + p.HTTPAddr + "/debug/limited?domain=shop&k=10")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r limited.Report
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	checkTop("/debug/limited", r)

	// /metrics: the three heaviest, cut at limited.MetricKeyBytes.
	_, metrics := adminGet(t, p, "/metrics", "")
	series := regexp.MustCompile(`(?m)^floodgate_limited_key_denied\{domain="shop",key="([^"]*)",rule="per_ip"\} `).FindAllStringSubmatch(metrics, -1)
	var labels []string
	for _, m := range series {
		labels = append(labels, m[1])
	}
	if want := []string{"remote_address=203.0.113.8", "remote_address=<img src=x onerro…", "remote_address=<script>document.…"}; fmt.Sprint(labels) != fmt.Sprint(want) {
		t.Errorf("/metrics keys %q, want the 3 heaviest, cut: %q", labels, want)
	}

	// floodgate top, as JSON and as the table.
	out, stderr, code := runCLI(t, "top", "--addr", p.HTTPAddr, "--domain", "shop", "--json")
	if code != 0 {
		t.Fatalf("floodgate top: exit %d: %s", code, stderr)
	}
	r = limited.Report{}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	checkTop("floodgate top --json", r)
	table, _, _ := runCLI(t, "top", "--addr", p.HTTPAddr)
	for _, v := range limitedAttackers {
		if !strings.Contains(table, "remote_address="+v) {
			t.Errorf("floodgate top's table lacks %q:\n%s", v, table)
		}
	}

	// The page, in Chromium.
	dom, shot := chromiumPage(t, "http://"+p.HTTPAddr+"/")
	if !regexp.MustCompile(`<svg[^>]*class="chart"[^>]*>\s*<polyline[^>]*class="decisions"[^>]*points="[0-9., ]+"`).MatchString(dom) {
		t.Errorf("the page drew no chart:\n%s", dom)
	}
	rows := regexp.MustCompile(`<td class="key">([^<]*)</td>`).FindAllStringSubmatch(dom, -1)
	if len(rows) != len(limitedAttackers) {
		t.Fatalf("the page shows %d keys, want %d:\n%s", len(rows), len(limitedAttackers), dom)
	}
	for rank, row := range rows {
		a := len(limitedAttackers) - 1 - rank
		if want := htmlEscape("remote_address=" + limitedAttackers[a]); row[1] != want {
			t.Errorf("the page's rank %d is %q, want %q", rank, row[1], want)
		}
	}
	if strings.Contains(dom, "pwned</title>") || !strings.Contains(dom, "<title>floodgate: who is being limited</title>") {
		t.Errorf("a key ran as script (the title changed):\n%s", dom)
	}
	if n := strings.Count(dom, "<script"); n != 1 || strings.Contains(dom, "<img") {
		t.Errorf("a key became markup (%d script elements, <img> present):\n%s", n, dom)
	}
	if *updateScreenshot {
		png, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../docs/img/admin-page.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// htmlEscape is how Chromium's DOM dump writes a text node.
func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\u00a0", "&nbsp;").Replace(s)
}

// chromiumPage loads url in a headless Chromium, lets its script run for
// a few seconds of virtual time, and returns the DOM as serialised then
// and the path of a PNG screenshot taken then (one Chromium run does
// both). Without Chromium the test skips, or
// fails under CI=true (make test installs it: scripts/ensure-test-deps.sh).
func chromiumPage(t *testing.T, url string) (dom, screenshot string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (scripts/ensure-test-deps.sh installs it)")
		}
		t.Skip("chromium is not installed (scripts/ensure-test-deps.sh installs it)")
	}
	dir := t.TempDir()
	screenshot = filepath.Join(dir, "page.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--virtual-time-budget=4000", "--window-size=1000,1400",
		"--dump-dom", "--screenshot="+screenshot, url)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, errb.String())
	}
	if st, err := os.Stat(screenshot); err != nil || st.Size() < 1000 {
		t.Fatalf("no screenshot: %v\n%s", err, errb.String())
	}
	return out.String(), screenshot
}

// TestLimitedViewsNeedAdminToken: with --auth-token-file, the page, its
// assets, /debug/limited, /debug/explain and `floodgate top` refuse a
// caller without an admin token, and serve one with it; the metrics
// export of keys is off unless asked for.
func TestLimitedViewsNeedAdminToken(t *testing.T) {
	const userToken, adminToken = "svc-token-Hh4e1", "ops-token-Qq82n"
	dir := t.TempDir()
	tokens := writeFile(t, dir, "tokens", []byte(adminToken+" admin\n"+userToken+"\n"))
	cfg := writeFile(t, dir, "rules.yaml", []byte(limitedRules))
	salt := writeFile(t, dir, "salt", []byte("a salt of more than sixteen bytes\n"))
	p := startServe(t, "--config", cfg, "--auth-token-file", tokens, "--limited-hash-salt-file", salt)
	for _, path := range []string{"/", "/ui/app.js", "/ui/app.css", "/debug/limited", "/debug/explain?domain=shop&descriptor=remote_address=1.2.3.4"} {
		for _, tc := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {"wrong-token", http.StatusUnauthorized}, {userToken, http.StatusForbidden}, {adminToken, http.StatusOK}} {
			if code, body := adminGet(t, p, path, tc.token); code != tc.want {
				t.Errorf("GET %s with token %q: %d, want %d: %s", path, tc.token, code, tc.want, body)
			}
		}
	}
	if code, body := adminGet(t, p, "/debug/explain?domain=shop&descriptor=remote_address=1.2.3.4", adminToken); !strings.Contains(body, `"matched": true`) {
		t.Errorf("explain: %d %s", code, body)
	}
	for _, token := range []string{"", userToken} {
		if _, stderr, code := runCLI(t, "top", "--addr", p.HTTPAddr, "--token", token); code != 1 {
			t.Errorf("floodgate top with token %q: exit %d, want 1: %s", token, code, stderr)
		}
	}
	if out, stderr, code := runCLI(t, "top", "--addr", p.HTTPAddr, "--token", adminToken); code != 0 || !strings.Contains(out, "1 replica(s)") {
		t.Errorf("floodgate top with the admin token: exit %d: %s%s", code, out, stderr)
	}
	// With the salt, keys show as keyed hashes.
	rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))
	for range 7 {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+userToken)
		if _, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "shop", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "198.51.100.7"}}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	_, body := adminGet(t, p, "/debug/limited", adminToken)
	if strings.Contains(body, "198.51.100.7") || !regexp.MustCompile(`"key": "[0-9a-f]{16}"`).MatchString(body) || !strings.Contains(body, `"hashed": true`) {
		t.Errorf("with --limited-hash-salt-file: %s", body)
	}
	// A browser with the admin token as basic auth (in the address here,
	// as a user would type it into the prompt) sees the keys, hashed; with
	// a token that is not an admin one it sees none.
	dom, _ := chromiumPage(t, "http://ops:"+adminToken+"@"+p.HTTPAddr+"/")
	if !regexp.MustCompile(`<td class="key">[0-9a-f]{16}</td>`).MatchString(dom) || strings.Contains(dom, "198.51.100.7") {
		t.Errorf("the page with the admin token shows no hashed key:\n%s", dom)
	}
	dom, _ = chromiumPage(t, "http://ops:"+userToken+"@"+p.HTTPAddr+"/")
	if strings.Contains(dom, `<td class="key">`) {
		t.Errorf("the page with a user token shows keys:\n%s", dom)
	}
	if _, body := adminGet(t, p, "/metrics", ""); strings.Contains(body, "floodgate_limited_key_denied") {
		t.Errorf("/metrics exports keys without --limited-metrics-keys")
	}
}
