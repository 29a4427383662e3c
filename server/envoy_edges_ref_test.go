package server_test

import (
	"context"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
)

// TestEnvoyBanBesideLimitChargesNothing: a ban list denies the request,
// so the other descriptor is not charged; a 0-hit check of a configured
// ban denies too.
func TestEnvoyBanBesideLimitChargesNothing(t *testing.T) {
	yaml := referenceRules + "  - key: ban\n    rate_limit: {unit: minute, requests_per_unit: 0}\n"
	h := startEnvoy(t, yaml, nil, server.EnvoySettings{})
	h.clock.Advance(10 * 1e9)
	ban := withOverride(d("unnamed", "b", -1), 0, typev3.RateLimitUnit_MINUTE)
	if got := codesOf(h.call(t, ban, d("named", "b", -1))); got != "OVER_LIMIT:OVER_LIMIT,OK" {
		t.Fatalf("ban beside a limit: %s", got)
	}
	if r := h.call(t, d("named", "b", 0)); r.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("named charged beside a ban: remaining %d, want 2", r.Statuses[0].LimitRemaining)
	}
	if got := codesOf(h.call(t, d("ban", "x", 0))); got != "OVER_LIMIT:OVER_LIMIT" {
		t.Fatalf("0-hit check of a configured ban: %s, want OVER_LIMIT", got)
	}
}

// TestEnvoyDynamicMetadataSkipsUnlimitedAndMergesDeep: an unlimited
// descriptor's metadata is left out (the reference skips it), and two
// passed descriptors' nested objects merge key by key.
func TestEnvoyDynamicMetadataSkipsUnlimitedAndMergesDeep(t *testing.T) {
	yaml := "domain: edge\ndescriptors:\n" +
		"  - key: free\n    rate_limit: {unlimited: true}\n    metadata: {from: free}\n" +
		"  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 9}\n    metadata: {m: {x: 1}}\n" +
		"  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 9}\n    metadata: {m: {y: 2, x: 3}}\n"
	h := startEnvoy(t, yaml, nil, server.EnvoySettings{DynamicMetadata: true})
	r := h.call(t, d("free", "1", -1), d("a", "1", -1), d("b", "1", -1))
	got, _ := protojson.Marshal(r.DynamicMetadata.GetFields()["metadata"])
	if !jsonEqual(t, got, []byte(`{"m":{"x":1,"y":2}}`)) {
		t.Errorf("metadata %s, want {\"m\":{\"x\":1,\"y\":2}}", got)
	}
}

// TestEnvoyDynamicMetadataNotUTF8: a domain and descriptor values that
// are not UTF-8 (Envoy copies header bytes into them) reach the dynamic
// metadata with each bad run replaced by U+FFFD, so that a strict proto3
// parser reads the response.
func TestEnvoyDynamicMetadataNotUTF8(t *testing.T) {
	h := startEnvoy(t, "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n", nil, server.EnvoySettings{DynamicMetadata: true})
	for _, domain := range []string{"edge", "ed\xffge"} {
		r, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("k", "v\xfe\xff"), testkit.Descriptor("k\xc3", "v")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := proto.Marshal(r); err != nil {
			t.Fatalf("domain %q: a strict proto3 encoder refuses the response: %v", domain, err)
		}
		md := r.GetDynamicMetadata().GetFields()
		if got := md["domain"].GetStringValue(); got != strings.ToValidUTF8(domain, "\uFFFD") {
			t.Errorf("domain %q", got)
		}
		descs := md["descriptors"].GetListValue().GetValues()
		if len(descs) != 2 || descs[0].GetStructValue().GetFields()["entries"].GetListValue().GetValues()[0].GetStringValue() != "k=v\uFFFD" ||
			descs[1].GetStructValue().GetFields()["entries"].GetListValue().GetValues()[0].GetStringValue() != "k\uFFFD=v" {
			t.Errorf("descriptors %v", descs)
		}
	}
}
