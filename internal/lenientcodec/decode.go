package lenientcodec

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// maxDepth bounds message nesting, as protobuf-go does (its default
// RecursionLimit).
const maxDepth = 10000

// errMalformed is wrapped by every wire-format error.
var errMalformed = errors.New("lenientcodec: malformed message")

// errTooDeep is Marshal's error for a message nested deeper than maxDepth.
var errTooDeep = fmt.Errorf("lenientcodec: message nested deeper than %d", maxDepth)

// Unmarshal decodes the protobuf wire format in b into m, which it merges
// into like proto.Merge. Strings are taken as the bytes they hold, UTF-8 or
// not; everything else follows protobuf-go: unknown fields are kept, a
// field sent with an unexpected wire type is kept as unknown, packed and
// unpacked repeated scalars are both accepted, and a later singular value
// replaces an earlier one while messages merge. Groups (proto2 only) are
// kept as unknown fields.
func Unmarshal(b []byte, m proto.Message) error {
	return decodeMessage(b, m.ProtoReflect(), 0)
}

func decodeMessage(b []byte, m protoreflect.Message, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nested deeper than %d", errMalformed, maxDepth)
	}
	fields := m.Descriptor().Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireErr(n)
		}
		tagLen := n
		n, err := decodeField(b[tagLen:], m, fields.ByNumber(num), typ, depth)
		if err != nil {
			return err
		}
		if n < 0 { // not a field of m, or not of the wire type it expects
			n = protowire.ConsumeFieldValue(num, typ, b[tagLen:])
			if n < 0 {
				return wireErr(n)
			}
			m.SetUnknown(append(m.GetUnknown(), b[:tagLen+n]...))
		}
		b = b[tagLen+n:]
	}
	return nil
}

// decodeField decodes one value of fd from b into m and returns the bytes
// it used, or -1 when fd is nil or the wire type does not fit fd (the
// value is then kept as unknown).
func decodeField(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor, typ protowire.Type, depth int) (int, error) {
	if fd == nil || fd.Kind() == protoreflect.GroupKind {
		return -1, nil
	}
	switch {
	case fd.IsMap():
		if typ != protowire.BytesType {
			return -1, nil
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, wireErr(n)
		}
		return n, decodeMapEntry(v, m.Mutable(fd).Map(), fd, depth)
	case fd.IsList():
		list := m.Mutable(fd).List()
		if typ == protowire.BytesType && isPackable(fd.Kind()) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, wireErr(n)
			}
			for len(v) > 0 {
				val, k, err := decodeScalar(v, fd.Kind())
				if err != nil {
					return 0, err
				}
				list.Append(val)
				v = v[k:]
			}
			return n, nil
		}
		if typ != wireTypeOf(fd.Kind()) {
			return -1, nil
		}
		val, n, err := decodeValue(b, fd.Kind(), list.NewElement, depth)
		if err != nil {
			return 0, err
		}
		list.Append(val)
		return n, nil
	}
	if typ != wireTypeOf(fd.Kind()) {
		return -1, nil
	}
	if fd.Kind() == protoreflect.MessageKind {
		// Decoded into the field's own message, which merges.
		_, n, err := decodeValue(b, fd.Kind(), func() protoreflect.Value { return m.Mutable(fd) }, depth)
		return n, err
	}
	val, n, err := decodeScalar(b, fd.Kind())
	if err != nil {
		return 0, err
	}
	m.Set(fd, val)
	return n, nil
}

// decodeMapEntry decodes one map entry (key = 1, value = 2) into mp.
func decodeMapEntry(b []byte, mp protoreflect.Map, fd protoreflect.FieldDescriptor, depth int) error {
	kd, vd := fd.MapKey(), fd.MapValue()
	key := kd.Default()
	val := vd.Default()
	if vd.Kind() == protoreflect.MessageKind {
		val = mp.NewValue()
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireErr(n)
		}
		b = b[n:]
		var d protoreflect.FieldDescriptor
		switch num {
		case 1:
			d = kd
		case 2:
			d = vd
		}
		if d == nil || typ != wireTypeOf(d.Kind()) {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return wireErr(n)
			}
			b = b[n:]
			continue
		}
		// A repeated message value merges into val.
		v, n, err := decodeValue(b, d.Kind(), func() protoreflect.Value { return val }, depth)
		if err != nil {
			return err
		}
		if num == 1 {
			key = v
		} else {
			val = v
		}
		b = b[n:]
	}
	mp.Set(key.MapKey(), val)
	return nil
}

// decodeValue decodes one value of kind k, sent with the wire type of k,
// from b and returns it with the bytes it used. A message is decoded into
// the message of msg(), which it returns.
func decodeValue(b []byte, k protoreflect.Kind, msg func() protoreflect.Value, depth int) (protoreflect.Value, int, error) {
	if k != protoreflect.MessageKind {
		return decodeScalar(b, k)
	}
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return protoreflect.Value{}, 0, wireErr(n)
	}
	val := msg()
	if err := decodeMessage(v, val.Message(), depth+1); err != nil {
		return protoreflect.Value{}, 0, err
	}
	return val, n, nil
}

// decodeScalar decodes one non-message value of kind k, sent with the
// wire type of k (callers check it first), and returns it with the bytes
// it used.
func decodeScalar(b []byte, k protoreflect.Kind) (protoreflect.Value, int, error) {
	var v uint64
	n := -1
	switch wireTypeOf(k) {
	case protowire.VarintType:
		v, n = protowire.ConsumeVarint(b)
	case protowire.Fixed32Type:
		var u uint32
		u, n = protowire.ConsumeFixed32(b)
		v = uint64(u)
	case protowire.Fixed64Type:
		v, n = protowire.ConsumeFixed64(b)
	case protowire.BytesType:
		raw, m := protowire.ConsumeBytes(b)
		switch {
		case m < 0:
			return protoreflect.Value{}, 0, wireErr(m)
		case k == protoreflect.StringKind:
			return protoreflect.ValueOfString(string(raw)), m, nil
		}
		return protoreflect.ValueOfBytes(append([]byte{}, raw...)), m, nil
	}
	if n < 0 {
		return protoreflect.Value{}, 0, wireErr(n)
	}
	return number(k, v), n, nil
}

// number is the value of the numeric kind k sent as the wire bits v (a
// varint, or a fixed32 or fixed64 widened to 64 bits).
func number(k protoreflect.Kind, v uint64) protoreflect.Value {
	switch k {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(v != 0)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(v)))
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(v))
	case protoreflect.Sint32Kind:
		return protoreflect.ValueOfInt32(int32(protowire.DecodeZigZag(v & math.MaxUint32)))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(v))
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(v))
	case protoreflect.Sint64Kind:
		return protoreflect.ValueOfInt64(protowire.DecodeZigZag(v))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(math.Float32frombits(uint32(v)))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(math.Float64frombits(v))
	}
	return protoreflect.ValueOfUint64(v) // Uint64Kind, Fixed64Kind
}

// wireTypeOf is the wire type a value of kind k is sent with, unpacked.
func wireTypeOf(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind,
		protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.BytesType // strings, bytes, messages
}

// isPackable reports whether repeated values of kind k may come packed.
func isPackable(k protoreflect.Kind) bool {
	return slices.Contains([]protowire.Type{protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type}, wireTypeOf(k))
}

func wireErr(n int) error {
	return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
}
