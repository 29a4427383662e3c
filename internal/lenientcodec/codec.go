// Package lenientcodec is a gRPC codec for protobuf that decides on bytes,
// not on their encoding: a string field holding bytes that are not UTF-8 is
// decoded as those bytes instead of failing the call.
//
// protobuf-go rejects such strings inside grpc-go's codec, before any
// interceptor runs, and Envoy copies HTTP header bytes into descriptor
// values and fails open on errors: one stray byte would skip every limit.
// Valid messages take protobuf-go's generated path unchanged; only a
// message it rejects is decoded again by Unmarshal, and a reply it cannot
// encode is encoded by Marshal, byte for byte.
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

// Marshal is grpc-go's protobuf marshalling, with the package's Marshal
// as a second try.
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
