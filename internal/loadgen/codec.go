package loadgen

import (
	"cmp"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The generator shares the machine with the server it measures, so every
// request is marshaled once before the run and every reply is read only as
// far as its verdict. The bytes on the wire are the generated clients'.

// rawRequest is a request marshaled before the run.
type rawRequest []byte

// verdict is field 1 of a reply, a varint.
type verdict uint64

// marshalRequest marshals m once for the run.
func marshalRequest(m proto.Message) rawRequest {
	b, err := proto.Marshal(m)
	if err != nil { // the run's own requests: cannot fail
		panic(fmt.Sprintf("loadgen: marshal %T: %v", m, err))
	}
	return b
}

// leanCodec sends rawRequests as they are and reads verdicts.
type leanCodec struct{}

// callCodec makes Invoke use leanCodec.
var callCodec = grpc.ForceCodecV2(leanCodec{})

func (leanCodec) Name() string { return "proto" }

func (leanCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(rawRequest)
	if !ok {
		return nil, fmt.Errorf("loadgen: cannot send %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(r)}, nil
}

func (leanCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData()
	} else {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		b = buf.ReadOnlyData()
	}
	switch out := v.(type) {
	case *verdict:
		return readVerdict(b, out)
	case *rlsVerdict:
		return readRLSVerdict(b, out)
	}
	return fmt.Errorf("loadgen: cannot read into %T", v)
}

// eachField calls f with the fields of the message b, in order, until f
// returns false: each field's number, wire type and value (a varint's
// bytes, or a length-prefixed value with its prefix). The error is that of
// malformed bytes.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte) bool) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		if !f(num, typ, b[n:n+m]) {
			return nil
		}
		b = b[n+m:]
	}
	return nil
}

// readVerdict reads field 1 of b into out.
func readVerdict(b []byte, out *verdict) error {
	*out = 0 // proto3: an absent field 1 is zero
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) bool {
		if num == 1 && typ == protowire.VarintType {
			x, _ := protowire.ConsumeVarint(v) // eachField checked it
			*out = verdict(x)
			return false
		}
		return true
	})
}

// rlsVerdict is what a RateLimitResponse says to the generator: its
// overall_code (field 1), and whether any of its statuses (field 2, a
// DescriptorStatus) has a current_limit (its field 2): an answer without
// one matched no rule.
type rlsVerdict struct {
	code    verdict
	limited bool
}

// readRLSVerdict reads a RateLimitResponse's overall_code and whether a
// status carries a limit.
func readRLSVerdict(b []byte, out *rlsVerdict) error {
	*out = rlsVerdict{}
	var statusErr error
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) bool {
		switch {
		case num == 1 && typ == protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v) // eachField checked it
			out.code = verdict(x)
		case num == 2 && typ == protowire.BytesType && !out.limited:
			st, _ := protowire.ConsumeBytes(v) // eachField checked it
			statusErr = eachField(st, func(num protowire.Number, typ protowire.Type, _ []byte) bool {
				out.limited = num == 2 && typ == protowire.BytesType
				return !out.limited
			})
		}
		return statusErr == nil
	})
	return cmp.Or(statusErr, err)
}
