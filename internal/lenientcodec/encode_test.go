package lenientcodec

import (
	"bytes"
	"testing"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestMarshalMatchesProtobuf: on every valid sample, Marshal writes the
// bytes protobuf-go's deterministic marshalling writes.
func TestMarshalMatchesProtobuf(t *testing.T) {
	st, _ := structpb.NewStruct(map[string]any{"b": true, "a": 2.0, "c": "x"})
	for _, m := range append(samples(), st, &rlqsv3.RateLimitQuotaResponse{}) {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Marshal(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%T:\n got %x\nwant %x", m, got, want)
		}
	}
}

// TestEchoNonUTF8: a message holding a string that is not UTF-8, decoded
// by the codec, is encoded by it again to the same bytes (protobuf-go
// refuses to encode it); unknown fields go back out too.
func TestEchoNonUTF8(t *testing.T) {
	in := []byte{}
	// RateLimitQuotaResponse.bucket_action[0].bucket_id.bucket = {"k\xff": "v\xfe"},
	// and an unknown field 99 (varint 1) in the response.
	entry := []byte{0x0a, 2, 'k', 0xff, 0x12, 2, 'v', 0xfe}
	bucket := append([]byte{0x0a, byte(len(entry))}, entry...)
	id := append([]byte{0x0a, byte(len(bucket))}, bucket...)
	in = append(in, 0x0a, byte(len(id)))
	in = append(in, id...)
	in = append(in, 0x98, 0x06, 1)

	var m rlqsv3.RateLimitQuotaResponse
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(in)}, &m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetBucketAction()[0].GetBucketId().GetBucket()["k\xff"]; got != "v\xfe" {
		t.Fatalf("decoded %q", got)
	}
	if _, err := proto.Marshal(&m); err == nil {
		t.Fatal("protobuf-go encoded invalid UTF-8: the test no longer shows anything")
	}
	out, err := (Codec{}).Marshal(&m)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if got := out.Materialize(); !bytes.Equal(got, in) {
		t.Errorf("echo:\n got %x\nwant %x", got, in)
	}
}

// TestMarshalNotAMessage: the codec refuses what is not a message.
func TestMarshalNotAMessage(t *testing.T) {
	if _, err := (Codec{}).Marshal(42); err == nil {
		t.Error("Marshal(42): no error")
	}
}

// TestMarshalTooDeep: a message nested past the recursion limit is an
// error, not a stack overflow.
func TestMarshalTooDeep(t *testing.T) {
	v := structpb.NewStringValue("x")
	for range maxDepth/2 + 2 {
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	if _, err := Marshal(v); err == nil {
		t.Error("no error")
	}
}
