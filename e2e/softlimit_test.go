package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// softRules give each algorithm an Envoy rule of 10 an hour warning at 8
// (as 80% and as a count), and a policy of the same.
func softRules() string {
	var b strings.Builder
	b.WriteString("domain: e2e\ndescriptors:\n")
	for i, alg := range []string{"token_bucket", "sliding_window", "sliding_window_log", "fixed_window"} {
		warn := "80%"
		if i%2 == 1 {
			warn = "8"
		}
		fmt.Fprintf(&b, "  - key: %s\n    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: %s, warn_at: %q}\n", alg, alg, warn)
	}
	b.WriteString("policies:\n  partner: {requests: 10, period: 1h, warn_at: 80%}\n")
	return b.String()
}

// TestSoftLimit: against the binary, on the embedded store and on Redis.
// Past a rule's or a policy's warning threshold (8 of 10) an allowed
// answer carries the warning: ratelimit-warning in the Envoy answer's
// headers, CheckResponse.warning with ratelimit-warning metadata on the
// gRPC Check API, and RateLimit-Warning on the HTTP door. Below it, and
// on a deny, none does.
func TestSoftLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		p := b.serve(t, "--config", writeRules(t, softRules()))
		for _, alg := range []string{"token_bucket", "sliding_window", "sliding_window_log", "fixed_window"} {
			for i := 1; i <= 11; i++ {
				r := p.call(t, rlsDesc(alg, "v"))
				wantCode, want := "OK:OK", ""
				switch {
				case i == 11:
					wantCode = "OVER_LIMIT:OVER_LIMIT"
				case i >= 8:
					want = `"e2e.` + alg + `";at=8`
				}
				if got := rlsHeaders(r)["ratelimit-warning"]; rlsCodes(r) != wantCode || got != want {
					t.Fatalf("envoy %s, request %d: %s, ratelimit-warning %q; want %s, %q", alg, i, rlsCodes(r), got, wantCode, want)
				}
			}
		}

		c := p.Client(t)
		req := &floodgatev1.CheckRequest{Key: "grpc", Source: &floodgatev1.CheckRequest_Policy{Policy: "partner"}}
		for i := 1; i <= 11; i++ {
			var md metadata.MD
			resp, err := c.Check(context.Background(), req, grpc.Header(&md))
			if err != nil {
				t.Fatal(err)
			}
			wantWarning := i >= 8 && i <= 10
			want := ""
			if wantWarning {
				want = `"partner";at=8`
			}
			if resp.Allowed != (i <= 10) || resp.Warning != wantWarning || resp.WarnAt != 8 || strings.Join(md.Get("ratelimit-warning"), "") != want {
				t.Fatalf("check %d: got %v, metadata %q; want warning %v, %q", i, resp, md.Get("ratelimit-warning"), wantWarning, want)
			}
		}

		for i := 1; i <= 11; i++ {
			a := post(t, p.proc, "/v1/check", "", `{"key":"http","policy":"partner"}`)
			want := ""
			if i >= 8 && i <= 10 {
				want = `"partner";at=8`
			}
			if got := a.header.Get("RateLimit-Warning"); got != want {
				t.Fatalf("http check %d: %d, RateLimit-Warning %q, want %q (%s)", i, a.status, got, want, a.body)
			}
			if want != "" && !strings.Contains(string(a.body), `"warning":true`) {
				t.Fatalf("http check %d: body %s lacks the warning", i, a.body)
			}
		}
	})
}
