package loadgen

import (
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

// fieldReader walks the fields of a message, as far as its caller asks.
type fieldReader struct {
	b   []byte // what is left to read
	err error  // why the walk stopped early; nil at the end of b
}

// next is the next field: its number, wire type and value (a varint's
// bytes, or a length-prefixed value with its prefix); ok is false at the
// end, or on malformed bytes (then err says why).
func (r *fieldReader) next() (num protowire.Number, typ protowire.Type, v []byte, ok bool) {
	if len(r.b) == 0 || r.err != nil {
		return 0, 0, nil, false
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 {
		r.err = protowire.ParseError(n)
		return 0, 0, nil, false
	}
	m := protowire.ConsumeFieldValue(num, typ, r.b[n:])
	if m < 0 {
		r.err = protowire.ParseError(m)
		return 0, 0, nil, false
	}
	v, r.b = r.b[n:n+m], r.b[n+m:]
	return num, typ, v, true
}

// readVerdict reads field 1 of b into out.
func readVerdict(b []byte, out *verdict) error {
	*out = 0 // proto3: an absent field 1 is zero
	r := fieldReader{b: b}
	for num, typ, v, ok := r.next(); ok; num, typ, v, ok = r.next() {
		if num == 1 && typ == protowire.VarintType {
			x, _ := protowire.ConsumeVarint(v) // next checked it
			*out = verdict(x)
			return nil
		}
	}
	return r.err
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
	r := fieldReader{b: b}
	for num, typ, v, ok := r.next(); ok; num, typ, v, ok = r.next() {
		switch {
		case num == 1 && typ == protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v) // next checked it
			out.code = verdict(x)
		case num == 2 && typ == protowire.BytesType && !out.limited:
			st, _ := protowire.ConsumeBytes(v) // next checked it
			limited, err := hasField(st, 2, protowire.BytesType)
			if err != nil {
				return err
			}
			out.limited = limited
		}
	}
	return r.err
}

// hasField reports whether the message b has field num of type typ.
func hasField(b []byte, num protowire.Number, typ protowire.Type) (bool, error) {
	r := fieldReader{b: b}
	for n, t, _, ok := r.next(); ok; n, t, _, ok = r.next() {
		if n == num && t == typ {
			return true, nil
		}
	}
	return false, r.err
}
