package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/internal/lenientcodec"
)

// fuzzRules has every rule kind: a strict limit the test counts,
// detailed metrics (detailed_metric, value_to_metric), shadow mode, quota
// mode, wildcards, nesting, a replaced limit, unlimited, a ban, failure
// modes, and every algorithm.
const fuzzRules = `domain: fz
descriptors:
  - key: strict
    value: v
    rate_limit: {unit: hour, requests_per_unit: 5, failure_mode: closed}
  - key: api_key
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tenant
    value_to_metric: true
    descriptors:
      - key: plan
        rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding_window}
  - key: wild
    value: pre*
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding_window_log}
  - key: leaky
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: leaky_bucket, failure_mode: open}
  - key: named
    rate_limit: {unit: hour, requests_per_unit: 4, name: named_limit}
  - key: replacer
    rate_limit: {unit: hour, requests_per_unit: 9, replaces: [{name: named_limit}]}
  - key: free
    rate_limit: {unlimited: true}
    metadata: {from: free}
  - key: ban
    rate_limit: {unit: second, requests_per_unit: 0}
`

// TestEnvoyFuzzBinary sends random requests to the built binary's Envoy
// API (random bytes in the domain, keys, values, hits, refunds, limit
// overrides and call metadata, on a config with every rule kind, with
// detailed metrics and dynamic metadata on) and asserts that no answer is
// an error (Envoy would let the request through) and that the strict
// 5-an-hour limit never admits more than 5 hits. Refunds are off, so no
// admission is ever given back. The run is a fixed number of requests
// from a seeded generator; the seed is logged, and FUZZ_SEED replays one.
func TestEnvoyFuzzBinary(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FUZZ_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FUZZ_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with FUZZ_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	p := startServe(t, "--config", writeRules(t, fuzzRules), "--detailed-metric-series", "10", "--response-dynamic-metadata", "--envoy-refunds=false")
	rls := rlsv3.NewRateLimitServiceClient(p.Conn(t, grpc.WithDefaultCallOptions(grpc.ForceCodecV2(lenientcodec.Codec{}))))
	waitOutHourEdge()

	admitted := uint64(0) // hits of strict=v admitted
	const requests = 2000
	for n := range requests {
		req := fuzzRequest(rng)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ctx = metadata.NewOutgoingContext(ctx, fuzzMetadata(rng))
		resp, err := rls.ShouldRateLimit(ctx, req)
		cancel()
		if err != nil {
			t.Fatalf("seed %d, request %d: an error answer: %v\nrequest: %v", seed, n, err, req)
		}
		if len(resp.GetStatuses()) != len(req.GetDescriptors()) {
			t.Fatalf("seed %d, request %d: %d statuses for %d descriptors", seed, n, len(resp.GetStatuses()), len(req.GetDescriptors()))
		}
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OK && req.GetDomain() == "fz" {
			admitted += strictHits(req)
		}
		if admitted > 5 {
			t.Fatalf("seed %d, request %d: %d hits of the 5-an-hour limit admitted\nrequest: %v", seed, n, admitted, req)
		}
	}
	// The limit is spent now, or the rest of it is admitted exactly.
	for range 6 {
		r, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "fz", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("strict", "v")}})
		if err != nil {
			t.Fatalf("seed %d: strict=v: %v", seed, err)
		}
		if r.GetOverallCode() == rlsv3.RateLimitResponse_OK {
			admitted++
		}
	}
	if admitted != 5 {
		t.Errorf("seed %d: %d hits of the 5-an-hour limit admitted in all, want 5", seed, admitted)
	}
	if got := p.logs.String(); strings.Contains(got, "panic") {
		t.Errorf("seed %d: a panic was logged:\n%s", seed, got)
	}
}

// strictHits is the hits req asks of the strict limit (strict=v alone as
// a descriptor, no override): the ones an OK answer admits.
func strictHits(req *rlsv3.RateLimitRequest) uint64 {
	total := uint64(0)
	for _, d := range req.GetDescriptors() {
		es := d.GetEntries()
		if len(es) != 1 || es[0].GetKey() != "strict" || es[0].GetValue() != "v" || d.GetLimit() != nil || d.GetIsNegativeHits() {
			continue
		}
		h := uint64(max(req.GetHitsAddend(), 1))
		if d.GetHitsAddend() != nil {
			h = d.GetHitsAddend().GetValue()
		}
		total += h
	}
	return total
}

// fuzzKeys and fuzzValues are the config's words, so that random requests
// match rules often; random bytes are mixed in.
var (
	fuzzKeys   = []string{"strict", "api_key", "tenant", "plan", "shadow", "quota", "wild", "leaky", "named", "replacer", "free", "ban"}
	fuzzValues = []string{"v", "pre", "prefix", "k1", "k2", "", "pro"}
)

// fuzzRequest is a random request: mostly the fz domain and the config's
// keys, with random bytes (valid UTF-8 or not) anywhere. Domain and keys
// stay non-empty and within --max-key-bytes, and descriptors within their
// bounds, and overrides use a unit Envoy names: those come from Envoy's
// own configuration, and a request outside them is answered
// InvalidArgument by design (docs/envoy.md).
func fuzzRequest(rng *rand.Rand) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: "fz"}
	if rng.IntN(8) == 0 {
		req.Domain = nonEmpty(randomBytes(rng, 64))
	}
	switch rng.IntN(6) {
	case 0:
		req.HitsAddend = uint32(rng.IntN(4))
	case 1:
		req.HitsAddend = rng.Uint32()
	}
	for range 1 + rng.IntN(5) {
		d := &ratelimitv3.RateLimitDescriptor{}
		for range 1 + rng.IntN(3) {
			k := fuzzKeys[rng.IntN(len(fuzzKeys))]
			if rng.IntN(6) == 0 {
				k = nonEmpty(randomBytes(rng, 32))
			}
			v := fuzzValues[rng.IntN(len(fuzzValues))]
			if rng.IntN(3) == 0 {
				v = randomBytes(rng, 48)
			}
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
		}
		switch rng.IntN(6) {
		case 0:
			d.HitsAddend = wrapperspb.UInt64(uint64(rng.IntN(4)))
		case 1:
			d.HitsAddend = wrapperspb.UInt64(rng.Uint64())
		}
		d.IsNegativeHits = rng.IntN(8) == 0
		if rng.IntN(10) == 0 && d.Entries[0].Key != "strict" {
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rng.Uint32N(10), Unit: typev3.RateLimitUnit(1 + rng.IntN(6))}
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

// fuzzMetadata is random call metadata: printable values, and binary
// ("-bin") ones of any bytes.
func fuzzMetadata(rng *rand.Rand) metadata.MD {
	md := metadata.MD{}
	for i := range rng.IntN(4) {
		md.Append("x-fuzz-"+strconv.Itoa(i), printable(rng, 40))
		md.Append("x-fuzz-"+strconv.Itoa(i)+"-bin", randomBytes(rng, 40))
	}
	return md
}

// randomBytes is up to n random bytes: often valid UTF-8, often not.
func randomBytes(rng *rand.Rand, n int) string {
	b := make([]byte, rng.IntN(n+1))
	for i := range b {
		if rng.IntN(2) == 0 {
			b[i] = byte('a' + rng.IntN(26))
		} else {
			b[i] = byte(rng.IntN(256))
		}
	}
	return string(b)
}

// printable is up to n printable ASCII bytes.
func printable(rng *rand.Rand, n int) string {
	b := make([]byte, rng.IntN(n+1))
	for i := range b {
		b[i] = byte(' ' + rng.IntN(95))
	}
	return string(b)
}

// nonEmpty is s, or "x" when s is empty.
func nonEmpty(s string) string {
	if s == "" {
		return "x"
	}
	return s
}
