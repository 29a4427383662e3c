package server_test

import (
	"context"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/floodgate/floodgate/server"
)

type dl = []*ratelimitv3.RateLimitDescriptor

// TestEnvoyQuotaMode: the answer is OVER_LIMIT iff a limit not in quota
// mode is over, or every quota-mode descriptor is (shouldRateLimitWorker).
// A quota-mode descriptor over its quota says OVER_LIMIT in its status.
// Floodgate charges what fitted when the request passes and nothing when
// it is denied (the reference charges every descriptor).
func TestEnvoyQuotaMode(t *testing.T) {
	s1, s2 := func() *ratelimitv3.RateLimitDescriptor { return d("service", "s1", -1) }, func() *ratelimitv3.RateLimitDescriptor { return d("service", "s2", -1) }
	runSteps(t, server.EnvoySettings{}, []refStep{
		{"both fit", dl{s1(), s2()}, 0, ok, []refStatus{{ok, 0, "", left}, {ok, 1, "", left}}},
		{"s1 over its quota, s2 fits: OK", dl{s1(), s2()}, 0, ok, []refStatus{{over, 0, "", left}, {ok, 0, "", left}}},
		{"every quota over: OVER_LIMIT", dl{s1(), s2()}, 0, over, []refStatus{{over, 0, "", left}, {over, 0, "", left}}},
		{"a regular limit fits, the only quota is over: OVER_LIMIT", dl{d("regular", "r", -1), s1()}, 0, over, []refStatus{{ok, 0, "", left}, {over, 0, "", left}}},
		// Denied above: regular r was not charged, so it still fits.
		{"regular over beats the quotas", dl{d("regular", "r", -1), d("regular", "r", -1), d("service", "s3", -1)}, 0, over,
			[]refStatus{{ok, 0, "", left}, {over, 0, "", left}, {ok, 0, "", 0}}},
		{"no quota descriptor over", dl{d("regular", "q", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
	})
}

// TestEnvoyQuotaModeCharges: in a passing request a quota-mode descriptor
// over its quota is not charged, the others are; a denied request charges
// nothing.
func TestEnvoyQuotaModeCharges(t *testing.T) {
	runSteps(t, server.EnvoySettings{}, []refStep{
		{"fill s1", dl{d("service", "s1", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"s1 over, s2 charged", dl{d("service", "s1", -1), d("service", "s2", -1)}, 0, ok, []refStatus{{over, 0, "", left}, {ok, 1, "", left}}},
		{"denied: regular not charged", dl{d("regular", "n", -1), d("service", "s1", -1)}, 0, over, []refStatus{{ok, 0, "", left}, {over, 0, "", left}}},
		{"regular still fits", dl{d("regular", "n", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"s2 has one left", dl{d("service", "s2", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
	})
}

// TestEnvoyGlobalQuotaMode: with the server's QuotaMode every limit is a
// quota (the reference's QUOTA_MODE).
func TestEnvoyGlobalQuotaMode(t *testing.T) {
	runSteps(t, server.EnvoySettings{QuotaMode: true}, []refStep{
		{"fill regular", dl{d("regular", "g", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"one of two over: OK", dl{d("regular", "g", -1), d("named", "g", -1)}, 0, ok, []refStatus{{over, 0, "", left}, {ok, 1, "per_minute", left}}},
		{"the only one over: OVER_LIMIT", dl{d("regular", "g", -1)}, 0, over, []refStatus{{over, 0, "", left}}},
		{"unlimited is no quota descriptor", dl{d("regular", "g", -1), d("free", "x", -1)}, 0, over, []refStatus{{over, 0, "", left}, {ok, 4294967295, "", 0}}},
	})
}

// TestEnvoyQuotaModeAlgorithms: quota mode composes with every algorithm:
// the look and the charge go through the store like any other limit.
func TestEnvoyQuotaModeAlgorithms(t *testing.T) {
	for _, alg := range []string{"fixed_window", "sliding_window", "token_bucket", "leaky_bucket", "sliding_window_log"} {
		t.Run(alg, func(t *testing.T) {
			yaml := "domain: edge\ndescriptors:\n" +
				"  - key: a\n    quota_mode: true\n    rate_limit: {algorithm: " + alg + ", unit: minute, requests_per_unit: 1}\n" +
				"  - key: b\n    quota_mode: true\n    rate_limit: {algorithm: " + alg + ", unit: minute, requests_per_unit: 2}\n"
			h := startEnvoy(t, yaml, nil, server.EnvoySettings{})
			want := []string{"OK:OK,OK", "OK:OVER_LIMIT,OK", "OVER_LIMIT:OVER_LIMIT,OVER_LIMIT"}
			if alg == "leaky_bucket" {
				// A queue of 1 or 2 drains one request per 60 or 30 s;
				// NoWait admits only what may start now, so b's second
				// request waits 30 s and is denied.
				want = []string{"OK:OK,OK", "OVER_LIMIT:OVER_LIMIT,OVER_LIMIT", "OVER_LIMIT:OVER_LIMIT,OVER_LIMIT"}
			}
			for i, w := range want {
				if got := codesOf(h.call(t, d("a", "x", -1), d("b", "x", -1))); got != w {
					t.Fatalf("call %d: %s, want %s", i, got, w)
				}
			}
		})
	}
}

// TestEnvoyDynamicMetadata: the reference's structure (ratelimitToMetadata):
// domain, descriptors (entries as key=value, the override's text, the
// descriptor's hitsAddend), the request's hitsAddend when not 0, and the
// merged metadata of the passed descriptors, the first one's value
// winning.
func TestEnvoyDynamicMetadata(t *testing.T) {
	h := startEnvoy(t, referenceRules, nil, server.EnvoySettings{DynamicMetadata: true})
	override := &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 42, Unit: typev3.RateLimitUnit_HOUR}
	tests := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{"both pass: first wins, structs merge",
			&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: dl{d("service", "s1", -1), d("service", "s2", 1)}},
			`{"domain":"edge","descriptors":[{"entries":["service=s1"]},{"entries":["service=s2"],"hitsAddend":1}],
			  "metadata":{"service_with_quota":{"name":"service_1"},"weight":2}}`},
		{"s1 over: s2's metadata only",
			&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: dl{d("service", "s1", -1), d("service", "s2", -1)}, HitsAddend: 1},
			`{"domain":"edge","descriptors":[{"entries":["service=s1"]},{"entries":["service=s2"]}],"hitsAddend":1,
			  "metadata":{"service_with_quota":{"name":"service_2"},"weight":2}}`},
		{"all over: no metadata",
			&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: dl{d("service", "s1", -1), d("service", "s2", -1)}},
			`{"domain":"edge","descriptors":[{"entries":["service=s1"]},{"entries":["service=s2"]}]}`},
		{"an override, two entries, no rule",
			&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: dl{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "a", Value: "1"}, {Key: "b", Value: "x=y"}}, Limit: override}}},
			`{"domain":"edge","descriptors":[{"entries":["a=1","b=x=y"],"limit":"` + override.String() + `"}]}`},
		{"unknown domain",
			&rlsv3.RateLimitRequest{Domain: "other", Descriptors: dl{d("service", "s1", 0)}},
			`{"domain":"other","descriptors":[{"entries":["service=s1"],"hitsAddend":0}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.client.ShouldRateLimit(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			want := &structpb.Struct{}
			if err := protojson.Unmarshal([]byte(tt.want), want); err != nil {
				t.Fatal(err)
			}
			got, _ := protojson.Marshal(resp.DynamicMetadata)
			wantJSON, _ := protojson.Marshal(want)
			if !jsonEqual(t, got, wantJSON) {
				t.Errorf("dynamic_metadata\n got %s\nwant %s", got, wantJSON)
			}
		})
	}
	// Off by default.
	plain := startEnvoy(t, referenceRules, nil, server.EnvoySettings{})
	if r := plain.call(t, d("service", "s1", -1)); r.DynamicMetadata != nil {
		t.Errorf("dynamic_metadata without the switch: %v", r.DynamicMetadata)
	}
}

// TestEnvoyDynamicMetadataLeavesConfigAlone: merging a later descriptor's
// metadata into the answer never changes the rule's own metadata.
func TestEnvoyDynamicMetadataLeavesConfigAlone(t *testing.T) {
	yaml := "domain: edge\ndescriptors:\n" +
		"  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 100}\n    metadata: {m: {x: 1}}\n" +
		"  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 100}\n    metadata: {m: {y: 2}}\n"
	h := startEnvoy(t, yaml, nil, server.EnvoySettings{DynamicMetadata: true})
	h.call(t, d("a", "1", -1), d("b", "1", -1))
	r := h.call(t, d("a", "1", -1))
	got, _ := protojson.Marshal(r.DynamicMetadata.GetFields()["metadata"])
	if !jsonEqual(t, got, []byte(`{"m":{"x":1}}`)) {
		t.Errorf("a's metadata after a merge: %s, want {\"m\":{\"x\":1}}", got)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	x, y := &structpb.Value{}, &structpb.Value{}
	if err := protojson.Unmarshal(a, x); err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(b, y); err != nil {
		t.Fatal(err)
	}
	xs, _ := protojson.MarshalOptions{}.Marshal(x)
	ys, _ := protojson.MarshalOptions{}.Marshal(y)
	return strings.ReplaceAll(string(xs), " ", "") == strings.ReplaceAll(string(ys), " ", "")
}
