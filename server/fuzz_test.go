package server_test

import (
	"context"
	"testing"
	"time"
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
)

// FuzzCheck sends arbitrary Check, Peek and CheckBatch requests: the
// server answers each with a decision, InvalidArgument or NotFound, never
// a panic (the recovery interceptor would turn one into Internal) or any
// other code, and decisions are self-consistent.
func FuzzCheck(f *testing.F) {
	f.Add("user:1", int32(1), int64(0), int64(3), int64(60_000_000_000), int64(0), "", false)
	f.Add("", int32(2), int64(-1), int64(0), int64(0), int64(0), "free", true)
	f.Add("k\x00{}", int32(3), int64(10_001), int64(10_001), int64(1), int64(5), "nope", false)
	f.Add("x", int32(4), int64(1<<62), int64(1<<62), int64(-1), int64(-7), "", true)
	f.Add("y", int32(99), int64(1), int64(1), int64(1_500_000), int64(1), "login", false)
	cfg, err := rules.Parse("p.yaml", []byte("policies:\n  free: {requests_per_min: 15, burst: 30}\n  login: {algorithm: sliding_window, requests: 5, period: 15m}\n"))
	if err != nil {
		f.Fatal(err)
	}
	h := start(f, nil, server.Settings{Rules: testkit.StaticRules(cfg)})
	f.Fuzz(func(t *testing.T, key string, alg int32, cost, requests, periodNs, burst int64, policy string, batch bool) {
		if !utf8.ValidString(key) || !utf8.ValidString(policy) {
			t.Skip("proto3 strings are UTF-8: the client cannot send this")
		}
		req := &floodgatev1.CheckRequest{Key: key, Algorithm: floodgatev1.Algorithm(alg), Cost: cost}
		if policy != "" {
			req.Source = &floodgatev1.CheckRequest_Policy{Policy: policy}
		} else {
			req.Source = &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: requests, Period: durationpb.New(time.Duration(periodNs)), Burst: burst}}
		}
		ctx := context.Background()
		var resp *floodgatev1.CheckResponse
		if batch {
			br, err := h.client.CheckBatch(ctx, &floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{req, req}})
			checkCode(t, err)
			if err == nil {
				resp = br.Results[0]
			}
		} else {
			r, err := h.client.Check(ctx, req)
			checkCode(t, err)
			resp = r
		}
		if resp != nil {
			if resp.Remaining < 0 || resp.Remaining > resp.Limit || (resp.Allowed && resp.RetryAfter.AsDuration() != 0) || resp.RetryAfter.AsDuration() < 0 {
				t.Fatalf("inconsistent decision %v", resp)
			}
		}
		peek := &floodgatev1.PeekRequest{Key: key, Algorithm: floodgatev1.Algorithm(alg), Cost: cost}
		if l := req.GetLimit(); l != nil {
			peek.Source = &floodgatev1.PeekRequest_Limit{Limit: l}
		} else {
			peek.Source = &floodgatev1.PeekRequest_Policy{Policy: policy}
		}
		_, err := h.client.Peek(ctx, peek)
		checkCode(t, err)
	})
}

func checkCode(t *testing.T, err error) {
	t.Helper()
	switch c := status.Code(err); c {
	case codes.OK, codes.InvalidArgument, codes.NotFound:
	default:
		t.Fatalf("got code %v (%v), want OK, InvalidArgument or NotFound", c, err)
	}
}

// FuzzShouldRateLimit sends arbitrary Envoy requests: OK, OVER_LIMIT or
// InvalidArgument, never a panic or another code.
func FuzzShouldRateLimit(f *testing.F) {
	f.Add("edge", "remote_address", "10.0.0.1", "plan", "free", uint32(1), int64(-1), false, uint32(0), int32(0))
	f.Add("", "", "", "", "", uint32(0), int64(0), true, uint32(5), int32(2))
	f.Add("edge", "plan", "free", "api_key", "k\x00", uint32(7), int64(3), true, uint32(1), int32(9))
	f.Add("edge", "login", "x", "", "", uint32(1<<31), int64(1<<40), false, uint32(0), int32(1))
	h := startEnvoy(f, testkit.EnvoyRules, nil, server.EnvoySettings{})
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string, hits uint32, descHits int64, negative bool, overrideReqs uint32, overrideUnit int32) {
		for _, s := range []string{domain, k1, v1, k2, v2} {
			if !utf8.ValidString(s) {
				t.Skip("proto3 strings are UTF-8: the client cannot send this")
			}
		}
		d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: k1, Value: v1}}, IsNegativeHits: negative}
		if k2 != "" || v2 != "" {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k2, Value: v2})
		}
		if descHits >= 0 {
			d.HitsAddend = wrapperspb.UInt64(uint64(descHits))
		}
		if overrideReqs > 0 {
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: overrideReqs, Unit: typev3.RateLimitUnit(overrideUnit)}
		}
		resp, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}, HitsAddend: hits})
		switch c := status.Code(err); c {
		case codes.OK:
			if resp.OverallCode != rlsv3.RateLimitResponse_OK && resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("overall code %v", resp.OverallCode)
			}
			if len(resp.Statuses) != 1 {
				t.Fatalf("%d statuses for one descriptor", len(resp.Statuses))
			}
		case codes.InvalidArgument:
		default:
			t.Fatalf("got code %v (%v)", c, err)
		}
	})
}
