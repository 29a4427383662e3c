package lenientcodec

import (
	"bytes"
	"math/rand/v2"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// samples are valid messages that between them use every kind of field the
// decoder handles: strings, bytes, enums, bools, varints, fixed widths,
// floats, nested and repeated messages, maps, oneofs, wrappers, proto2.
func samples() []proto.Message {
	st, _ := structpb.NewStruct(map[string]any{
		"a": 1.5, "b": "x", "c": true, "d": []any{1.0, "two", nil}, "e": map[string]any{"f": -3.0},
	})
	return []proto.Message{
		&rlsv3.RateLimitRequest{
			Domain:     "edge",
			HitsAddend: 7,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{
				Entries:        []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "1.2.3.4"}, {Key: "path", Value: "/a"}},
				Limit:          &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9, Unit: 2, UnitMultiplier: wrapperspb.UInt32(3)},
				HitsAddend:     wrapperspb.UInt64(1 << 40),
				IsNegativeHits: true,
			}, {Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k"}}}},
		},
		&rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT, RawBody: []byte{0, 1, 0xff}, DynamicMetadata: st},
		&floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{
			{Key: "user:42", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Cost: -5, Source: &floodgatev1.CheckRequest_Policy{Policy: "login"}},
			{Key: "k", Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 10, Burst: 1}}},
		}},
		&descriptorpb.FileDescriptorProto{
			Name: proto.String("a.proto"), Dependency: []string{"b.proto", "c.proto"}, PublicDependency: []int32{0, -1, 1 << 30},
			MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("M"), Field: []*descriptorpb.FieldDescriptorProto{{
				Name: proto.String("f"), Number: proto.Int32(-7), Label: descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum(),
			}}}},
			Options: &descriptorpb.FileOptions{JavaMultipleFiles: proto.Bool(true), OptimizeFor: descriptorpb.FileOptions_LITE_RUNTIME.Enum()},
		},
	}
}

// TestUnmarshalMatchesProtobuf: on every valid message, and on every prefix
// and random corruption of one, the lenient decoder agrees with protobuf-go
// whenever protobuf-go accepts the bytes.
func TestUnmarshalMatchesProtobuf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, want := range samples() {
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		check := func(b []byte) {
			t.Helper()
			ref := want.ProtoReflect().New().Interface()
			if proto.Unmarshal(b, ref) != nil {
				return
			}
			got := want.ProtoReflect().New().Interface()
			if err := Unmarshal(b, got); err != nil {
				t.Fatalf("%T %x: protobuf-go accepts, Unmarshal: %v", want, b, err)
			}
			if !proto.Equal(ref, got) {
				t.Fatalf("%T %x:\n got %v\nwant %v", want, b, got, ref)
			}
		}
		check(b)
		for i := range b {
			check(b[:i])
		}
		for range 2000 {
			c := bytes.Clone(b)
			for range 1 + rng.IntN(3) {
				c[rng.IntN(len(c))] = byte(rng.Uint32())
			}
			check(c)
		}
	}
}

// TestUnmarshalKeepsInvalidUTF8 is the point of the package: the bytes
// protobuf-go rejects in a proto3 string arrive as they were sent.
func TestUnmarshalKeepsInvalidUTF8(t *testing.T) {
	valid := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "1.2.3.4Z"}},
	}}}
	b, _ := proto.Marshal(valid)
	b = bytes.Replace(b, []byte("4Z"), []byte("4\xff"), 1)
	if err := proto.Unmarshal(b, &rlsv3.RateLimitRequest{}); err == nil {
		t.Fatal("protobuf-go accepted invalid UTF-8; the test no longer shows anything")
	}
	var got rlsv3.RateLimitRequest
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil {
		t.Fatal(err)
	}
	if v := got.GetDescriptors()[0].GetEntries()[0].GetValue(); v != "1.2.3.4\xff" {
		t.Fatalf("value %q, want %q", v, "1.2.3.4\xff")
	}
}

// TestCodecRejectsMalformed: bytes that are not a message stay an error.
func TestCodecRejectsMalformed(t *testing.T) {
	for _, b := range [][]byte{{0x0a, 0x05, 'a'}, {0xff}, {0x0a}} {
		var m rlsv3.RateLimitRequest
		if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &m); err == nil {
			t.Errorf("%x: no error", b)
		}
	}
	if err := (Codec{}).Unmarshal(nil, 42); err == nil {
		t.Error("a non-message: no error")
	}
}

// FuzzUnmarshal: whatever protobuf-go accepts, Unmarshal decodes equally;
// nothing panics.
func FuzzUnmarshal(f *testing.F) {
	for _, m := range samples() {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, want := range samples() {
			ref := want.ProtoReflect().New().Interface()
			got := want.ProtoReflect().New().Interface()
			err := Unmarshal(b, got)
			if proto.Unmarshal(b, ref) != nil {
				continue
			}
			if err != nil {
				t.Fatalf("%T: protobuf-go accepts, Unmarshal: %v", want, err)
			}
			if !proto.Equal(ref, got) {
				t.Fatalf("%T:\n got %v\nwant %v", want, got, ref)
			}
		}
	})
}
