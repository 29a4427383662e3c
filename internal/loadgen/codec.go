package loadgen

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The generator shares the machine with the server it measures, so it
// does as little as a client can: every request is marshaled once, before
// the run (rawRequest), and every reply is read only as far as its verdict,
// field 1 (verdict): CheckResponse.allowed, RateLimitResponse.overall_code,
// HealthCheckResponse.status. The bytes on the wire are the ones the
// generated clients send and receive; only the client's own CPU differs,
// the same way for every API, the health ceiling included.

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

// readVerdict reads field 1 of b into out.
func readVerdict(b []byte, out *verdict) error {
	*out = 0 // proto3: an absent field 1 is zero
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			x, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			*out = verdict(x)
			return nil
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil
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
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			x, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			out.code = verdict(x)
			b = b[m:]
			continue
		case num == 2 && typ == protowire.BytesType && !out.limited:
			st, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			limited, err := hasField(st, 2, protowire.BytesType)
			if err != nil {
				return err
			}
			out.limited = limited
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil
}

// hasField reports whether the message b has field num of type typ.
func hasField(b []byte, num protowire.Number, typ protowire.Type) (bool, error) {
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return false, protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && t == typ {
			return true, nil
		}
		m := protowire.ConsumeFieldValue(n, t, b)
		if m < 0 {
			return false, protowire.ParseError(m)
		}
		b = b[m:]
	}
	return false, nil
}
