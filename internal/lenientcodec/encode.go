package lenientcodec

import (
	"cmp"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Marshal encodes m in the protobuf wire format with strings written as
// the bytes they hold, so a reply echoing a client's string never fails.
// Fields go in number order, then m's unknown fields; it fails only for a
// message nested deeper than maxDepth.
func Marshal(m proto.Message) ([]byte, error) {
	return appendMessage(nil, m.ProtoReflect(), 0)
}

type field struct {
	fd protoreflect.FieldDescriptor
	v  protoreflect.Value
}

func appendMessage(b []byte, m protoreflect.Message, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	var fields []field
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fields = append(fields, field{fd, v})
		return true
	})
	slices.SortFunc(fields, func(a, b field) int { return cmp.Compare(a.fd.Number(), b.fd.Number()) })
	var err error
	for _, f := range fields {
		if b, err = appendField(b, f.fd, f.v, depth); err != nil {
			return nil, err
		}
	}
	return append(b, m.GetUnknown()...), nil
}

func appendField(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value, depth int) ([]byte, error) {
	var err error
	switch {
	case fd.IsMap():
		mp := v.Map()
		keys := make([]protoreflect.MapKey, 0, mp.Len())
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k)
			return true
		})
		slices.SortFunc(keys, compareKeys)
		for _, k := range keys {
			var entry []byte
			if entry, err = appendValue(nil, fd.MapKey(), k.Value(), depth); err != nil {
				return nil, err
			}
			if entry, err = appendValue(entry, fd.MapValue(), mp.Get(k), depth); err != nil {
				return nil, err
			}
			b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
			b = protowire.AppendBytes(b, entry)
		}
		return b, nil
	case fd.IsList():
		l := v.List()
		if fd.IsPacked() && isPackable(fd.Kind()) {
			var packed []byte
			for i := range l.Len() {
				packed = appendScalar(packed, fd.Kind(), l.Get(i))
			}
			b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
			return protowire.AppendBytes(b, packed), nil
		}
		for i := range l.Len() {
			if b, err = appendValue(b, fd, l.Get(i), depth); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return appendValue(b, fd, v, depth)
}

// appendValue appends one tagged value of fd.
func appendValue(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value, depth int) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		sub, err := appendMessage(nil, v.Message(), depth+1)
		if err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
		return protowire.AppendBytes(b, sub), nil
	case protoreflect.GroupKind:
		b = protowire.AppendTag(b, fd.Number(), protowire.StartGroupType)
		b, err := appendMessage(b, v.Message(), depth+1)
		if err != nil {
			return nil, err
		}
		return protowire.AppendTag(b, fd.Number(), protowire.EndGroupType), nil
	}
	b = protowire.AppendTag(b, fd.Number(), wireTypeOf(fd.Kind()))
	return appendScalar(b, fd.Kind(), v), nil
}

// appendScalar appends one untagged non-message value of kind k.
func appendScalar(b []byte, k protoreflect.Kind, v protoreflect.Value) []byte {
	switch k {
	case protoreflect.BoolKind:
		return protowire.AppendVarint(b, protowire.EncodeBool(v.Bool()))
	case protoreflect.EnumKind:
		return protowire.AppendVarint(b, uint64(v.Enum()))
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		return protowire.AppendVarint(b, uint64(v.Int()))
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return protowire.AppendVarint(b, protowire.EncodeZigZag(v.Int()))
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return protowire.AppendVarint(b, v.Uint())
	case protoreflect.Fixed32Kind:
		return protowire.AppendFixed32(b, uint32(v.Uint()))
	case protoreflect.Sfixed32Kind:
		return protowire.AppendFixed32(b, uint32(v.Int()))
	case protoreflect.FloatKind:
		return protowire.AppendFixed32(b, math.Float32bits(float32(v.Float())))
	case protoreflect.Fixed64Kind:
		return protowire.AppendFixed64(b, v.Uint())
	case protoreflect.Sfixed64Kind:
		return protowire.AppendFixed64(b, uint64(v.Int()))
	case protoreflect.DoubleKind:
		return protowire.AppendFixed64(b, math.Float64bits(v.Float()))
	case protoreflect.StringKind:
		return protowire.AppendString(b, v.String())
	}
	return protowire.AppendBytes(b, v.Bytes()) // BytesKind
}

// compareKeys orders map keys: booleans, integers or strings.
func compareKeys(a, b protoreflect.MapKey) int {
	switch x := a.Interface().(type) {
	case bool:
		y := b.Bool()
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case string:
		return cmp.Compare(x, b.String())
	case int32, int64:
		return cmp.Compare(a.Int(), b.Int())
	}
	return cmp.Compare(a.Uint(), b.Uint())
}
