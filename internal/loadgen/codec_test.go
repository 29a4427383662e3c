package loadgen

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// TestLeanCodecReadsTheVerdict: the generator's reply decoder reads field
// 1 of real replies, in one buffer or split across several, and zero when
// proto3 left it out.
func TestLeanCodecReadsTheVerdict(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		want verdict
	}{
		{"check allowed", &floodgatev1.CheckResponse{Allowed: true, Limit: 10, Remaining: 9}, 1},
		{"check denied", &floodgatev1.CheckResponse{Limit: 10}, 0},
		{"rls over limit with statuses and headers", &rlsv3.RateLimitResponse{
			OverallCode:          rlsv3.RateLimitResponse_OVER_LIMIT,
			Statuses:             []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OVER_LIMIT}},
			ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "retry-after", Value: "3"}},
		}, verdict(rlsv3.RateLimitResponse_OVER_LIMIT)},
		{"rls ok", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, verdict(rlsv3.RateLimitResponse_OK)},
	}
	for _, tt := range tests {
		b, err := proto.Marshal(tt.msg)
		if err != nil {
			t.Fatal(err)
		}
		for _, split := range []int{0, 1, len(b) / 2} {
			var data mem.BufferSlice
			if split == 0 || split >= len(b) {
				data = mem.BufferSlice{mem.SliceBuffer(b)}
			} else {
				data = mem.BufferSlice{mem.SliceBuffer(b[:split]), mem.SliceBuffer(b[split:])}
			}
			var v verdict = 99
			if err := (leanCodec{}).Unmarshal(data, &v); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if v != tt.want {
				t.Errorf("%s (split %d): got %d, want %d", tt.name, split, v, tt.want)
			}
		}
	}
	for _, bad := range [][]byte{{0x08}, {0x80}, {0x12, 0x05, 0x08}} { // a value, a tag, a length cut short
		var v verdict
		if err := (leanCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(bad)}, &v); err == nil {
			t.Errorf("a truncated reply %x decoded without error", bad)
		}
		var rv rlsVerdict
		if err := (leanCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(bad)}, &rv); err == nil {
			t.Errorf("a truncated RLS reply %x decoded without error", bad)
		}
	}
	if _, err := (leanCodec{}).Marshal(&floodgatev1.CheckRequest{}); err == nil {
		t.Error("a message that was not marshaled before the run was accepted")
	}
}

// TestLeanCodecReadsTheRLSLimit: an RLS reply reads as its overall_code
// and whether any status carries a current_limit, whatever comes first
// on the wire; a reply that matched no rule (statuses without limits, or
// none) is not limited.
func TestLeanCodecReadsTheRLSLimit(t *testing.T) {
	limit := &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 10, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE}
	tests := []struct {
		name        string
		msg         *rlsv3.RateLimitResponse
		wantCode    verdict
		wantLimited bool
	}{
		{"no rule matched", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OK}, {Code: rlsv3.RateLimitResponse_OK, LimitRemaining: 3}}}, 1, false},
		{"no statuses", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, 1, false},
		{"the first status limited", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: limit, LimitRemaining: 9}}}, 1, true},
		{"the first of two statuses limited", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: limit}, {Code: rlsv3.RateLimitResponse_OK}}}, 1, true},
		{"the second status limited, over limit", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
			Statuses:             []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OK}, {Code: rlsv3.RateLimitResponse_OVER_LIMIT, CurrentLimit: limit}},
			ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "retry-after", Value: "3"}}}, 2, true},
	}
	for _, tt := range tests {
		b, err := proto.Marshal(tt.msg)
		if err != nil {
			t.Fatal(err)
		}
		// The same fields, overall_code last on the wire.
		var reordered []byte
		if len(tt.msg.Statuses) > 0 {
			tail := proto.Clone(tt.msg).(*rlsv3.RateLimitResponse)
			tail.OverallCode = 0
			head, _ := proto.Marshal(tail)
			code, _ := proto.Marshal(&rlsv3.RateLimitResponse{OverallCode: tt.msg.OverallCode})
			reordered = append(head, code...)
		}
		for _, wire := range [][]byte{b, reordered} {
			if wire == nil {
				continue
			}
			for _, split := range []int{0, 1, len(wire) / 2} {
				data := mem.BufferSlice{mem.SliceBuffer(wire)}
				if split > 0 {
					data = mem.BufferSlice{mem.SliceBuffer(wire[:split]), mem.SliceBuffer(wire[split:])}
				}
				v := rlsVerdict{code: 99, limited: !tt.wantLimited}
				if err := (leanCodec{}).Unmarshal(data, &v); err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				if v.code != tt.wantCode || v.limited != tt.wantLimited {
					t.Errorf("%s (split %d): got %+v, want code %d, limited %v", tt.name, split, v, tt.wantCode, tt.wantLimited)
				}
			}
		}
		if len(b) > 1 {
			var v rlsVerdict
			if err := (leanCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:len(b)-1])}, &v); err == nil && len(tt.msg.Statuses) > 0 {
				t.Errorf("%s: a truncated reply decoded without error", tt.name)
			}
		}
	}
}
