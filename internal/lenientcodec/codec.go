// Package lenientcodec is a gRPC codec for protobuf that decides on bytes,
// not on their encoding: a string field holding bytes that are not UTF-8 is
// decoded as those bytes instead of failing the call.
//
// proto3 asks decoders to reject such strings, and protobuf-go does, inside
// grpc-go's codec, before any interceptor or handler runs: the call ends as
// INTERNAL, uncounted and unlogged. For a rate limiter that is a bypass.
// Envoy copies HTTP header bytes into descriptor values, its filter fails
// open on errors, so one stray byte in a header skipped every limit.
// floodgate's own API declares its strings unvalidated (see the proto), but
// Envoy's messages are proto3 and generated elsewhere, so the server
// installs this codec for every request.
//
// Valid messages take protobuf-go's generated fast path unchanged; only a
// message that path rejects is decoded again by Unmarshal, a reflection
// decoder that accepts any bytes in strings and is otherwise as strict as
// protobuf-go about the wire format. Replies go the same way: a reply
// protobuf-go cannot encode (it echoes a string that is not UTF-8) is
// encoded by Marshal, byte for byte, so the same bytes that came in go
// back out.
package lenientcodec

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// Codec is the grpc-go codec: protobuf-go's for marshalling, and for
// unmarshalling with a lenient second try. Install it on a server with
// grpc.ForceServerCodecV2(lenientcodec.Codec{}).
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Name is "proto", the codec it stands in for.
func (Codec) Name() string { return protocodec.Name }

// Marshal is grpc-go's protobuf marshalling, with a lenient second try:
// a message protobuf-go refuses (a string field holding bytes that are not
// UTF-8, taken in by Unmarshal and echoed back) is encoded again by the
// package's Marshal, which writes those bytes as they are.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	out, err := encoding.GetCodecV2(protocodec.Name).Marshal(v)
	if err == nil {
		return out, nil
	}
	m := messageOf(v)
	if m == nil {
		return nil, err
	}
	b, lerr := Marshal(m)
	if lerr != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// Unmarshal decodes data into v, which must be a protobuf message. It tries
// protobuf-go first; if that fails, it decodes again with Unmarshal, and
// reports protobuf-go's error only when that fails too.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("lenientcodec: cannot unmarshal into %T, want a protobuf message", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	err := proto.Unmarshal(b, m)
	if err == nil {
		return nil
	}
	proto.Reset(m)
	if Unmarshal(b, m) != nil {
		proto.Reset(m)
		return err
	}
	return nil
}

func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV2:
		return v
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	}
	return nil
}
