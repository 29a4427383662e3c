package lenientcodec

import (
	"bytes"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// allKinds is a proto3 message with a field of every scalar kind (enums
// with negative numbers too), packed
// and unpacked repeated fields, maps keyed by every key kind, and nested
// messages.
func allKinds(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	type fd = descriptorpb.FieldDescriptorProto
	opt, rep := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	f := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type, label *descriptorpb.FieldDescriptorProto_Label, typeName string) *fd {
		d := &fd{Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(), Label: label, JsonName: proto.String(name)}
		if typeName != "" {
			d.TypeName = proto.String(typeName)
		}
		return d
	}
	var fields []*fd
	kinds := []descriptorpb.FieldDescriptorProto_Type{
		descriptorpb.FieldDescriptorProto_TYPE_INT32, descriptorpb.FieldDescriptorProto_TYPE_INT64,
		descriptorpb.FieldDescriptorProto_TYPE_UINT32, descriptorpb.FieldDescriptorProto_TYPE_UINT64,
		descriptorpb.FieldDescriptorProto_TYPE_SINT32, descriptorpb.FieldDescriptorProto_TYPE_SINT64,
		descriptorpb.FieldDescriptorProto_TYPE_FIXED32, descriptorpb.FieldDescriptorProto_TYPE_FIXED64,
		descriptorpb.FieldDescriptorProto_TYPE_SFIXED32, descriptorpb.FieldDescriptorProto_TYPE_SFIXED64,
		descriptorpb.FieldDescriptorProto_TYPE_FLOAT, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE,
		descriptorpb.FieldDescriptorProto_TYPE_BOOL, descriptorpb.FieldDescriptorProto_TYPE_STRING,
		descriptorpb.FieldDescriptorProto_TYPE_BYTES,
	}
	for i, k := range kinds {
		fields = append(fields, f("s"+k.String(), int32(i+1), k, opt, ""))
		fields = append(fields, f("r"+k.String(), int32(i+101), k, rep, ""))
	}
	fields = append(fields,
		f("child", 200, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, opt, ".k.All"),
		f("children", 201, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, rep, ".k.All"),
		f("m_int", 202, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, rep, ".k.All.MIntEntry"),
		f("m_bool", 203, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, rep, ".k.All.MBoolEntry"),
		f("m_u64", 204, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, rep, ".k.All.MU64Entry"),
		f("m_str", 205, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, rep, ".k.All.MStrEntry"),
		f("m_s64", 206, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, rep, ".k.All.MS64Entry"),
		f("e", 207, descriptorpb.FieldDescriptorProto_TYPE_ENUM, opt, ".k.E"),
		f("es", 208, descriptorpb.FieldDescriptorProto_TYPE_ENUM, rep, ".k.E"),
	)
	entry := func(name string, key descriptorpb.FieldDescriptorProto_Type, val descriptorpb.FieldDescriptorProto_Type, valType string) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
			Field: []*fd{f("key", 1, key, opt, ""), f("value", 2, val, opt, valType)}}
	}
	file := &descriptorpb.FileDescriptorProto{Name: proto.String("k.proto"), Package: proto.String("k"), Syntax: proto.String("proto3"),
		EnumType: []*descriptorpb.EnumDescriptorProto{{Name: proto.String("E"), Value: []*descriptorpb.EnumValueDescriptorProto{
			{Name: proto.String("E_ZERO"), Number: proto.Int32(0)}, {Name: proto.String("E_NEG"), Number: proto.Int32(-3)},
		}}},
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("All"), Field: fields, NestedType: []*descriptorpb.DescriptorProto{
			entry("MIntEntry", descriptorpb.FieldDescriptorProto_TYPE_INT32, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
			entry("MBoolEntry", descriptorpb.FieldDescriptorProto_TYPE_BOOL, descriptorpb.FieldDescriptorProto_TYPE_SINT64, ""),
			entry("MU64Entry", descriptorpb.FieldDescriptorProto_TYPE_UINT64, descriptorpb.FieldDescriptorProto_TYPE_FIXED32, ""),
			entry("MStrEntry", descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".k.All"),
			entry("MS64Entry", descriptorpb.FieldDescriptorProto_TYPE_SINT64, descriptorpb.FieldDescriptorProto_TYPE_BYTES, ""),
		}}}}
	fdesc, err := protodesc.NewFile(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fdesc.Messages().ByName("All")
}

// fill sets every field of m to values that test each kind's encoding:
// negatives, extremes, several elements.
func fill(m protoreflect.Message, depth int) {
	vals := func(k protoreflect.Kind) []protoreflect.Value {
		switch k {
		case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
			return []protoreflect.Value{protoreflect.ValueOfInt32(-7), protoreflect.ValueOfInt32(math.MaxInt32), protoreflect.ValueOfInt32(math.MinInt32)}
		case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
			return []protoreflect.Value{protoreflect.ValueOfInt64(-9), protoreflect.ValueOfInt64(math.MaxInt64), protoreflect.ValueOfInt64(math.MinInt64)}
		case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
			return []protoreflect.Value{protoreflect.ValueOfUint32(7), protoreflect.ValueOfUint32(math.MaxUint32)}
		case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			return []protoreflect.Value{protoreflect.ValueOfUint64(9), protoreflect.ValueOfUint64(math.MaxUint64)}
		case protoreflect.FloatKind:
			return []protoreflect.Value{protoreflect.ValueOfFloat32(-1.5), protoreflect.ValueOfFloat32(3.25)}
		case protoreflect.DoubleKind:
			return []protoreflect.Value{protoreflect.ValueOfFloat64(-2.5), protoreflect.ValueOfFloat64(1e300)}
		case protoreflect.BoolKind:
			return []protoreflect.Value{protoreflect.ValueOfBool(true), protoreflect.ValueOfBool(false)}
		case protoreflect.EnumKind:
			return []protoreflect.Value{protoreflect.ValueOfEnum(-3), protoreflect.ValueOfEnum(5)}
		case protoreflect.StringKind:
			return []protoreflect.Value{protoreflect.ValueOfString("héllo"), protoreflect.ValueOfString("b")}
		case protoreflect.BytesKind:
			return []protoreflect.Value{protoreflect.ValueOfBytes([]byte{0, 0xff}), protoreflect.ValueOfBytes([]byte("x"))}
		}
		return nil
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			if depth > 0 && fd.MapValue().Kind() == protoreflect.MessageKind {
				continue
			}
			mp := m.Mutable(fd).Map()
			for j, k := range vals(fd.MapKey().Kind()) {
				var v protoreflect.Value
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					v = mp.NewValue()
					fill(v.Message(), depth+1)
				} else {
					vs := vals(fd.MapValue().Kind())
					v = vs[j%len(vs)]
				}
				mp.Set(k.MapKey(), v)
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth > 0 {
				continue
			}
			if fd.IsList() {
				l := m.Mutable(fd).List()
				for range 2 {
					v := l.NewElement()
					fill(v.Message(), depth+1)
					l.Append(v)
				}
				continue
			}
			fill(m.Mutable(fd).Message(), depth+1)
		case fd.IsList():
			l := m.Mutable(fd).List()
			for _, v := range vals(fd.Kind()) {
				l.Append(v)
			}
		default:
			m.Set(fd, vals(fd.Kind())[0])
		}
	}
}

// TestMarshalEveryKind: Marshal agrees byte for byte with protobuf-go's
// deterministic marshalling on every kind of field, packed repeated
// scalars and maps of every key kind included.
func TestMarshalEveryKind(t *testing.T) {
	m := dynamicpb.NewMessage(allKinds(t))
	fill(m, 0)
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Marshal:\n got %x\nwant %x", got, want)
	}
	back := dynamicpb.NewMessage(m.Descriptor())
	if err := Unmarshal(got, back); err != nil || !proto.Equal(back, m) {
		t.Errorf("round trip: %v, equal %v", err, proto.Equal(back, m))
	}
}

// TestUnmarshalWideVarints: varints wider than their kind (a 32-bit
// field sent with bits above 32, a bool of 2) decode as protobuf-go
// decodes them, packed too.
func TestUnmarshalWideVarints(t *testing.T) {
	desc := allKinds(t)
	fields := desc.Fields()
	wide := []uint64{0x1_0000_0002, 0xffff_ffff_ffff_fffe, 2, 0x8000_0001}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsMap() || fd.Message() != nil || wireTypeOf(fd.Kind()) != protowire.VarintType {
			continue
		}
		for _, v := range wide {
			var b []byte
			if fd.IsList() { // packed
				b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
				b = protowire.AppendBytes(b, protowire.AppendVarint(protowire.AppendVarint(nil, v), v))
			} else {
				b = protowire.AppendTag(b, fd.Number(), protowire.VarintType)
				b = protowire.AppendVarint(b, v)
			}
			want := dynamicpb.NewMessage(desc)
			if err := proto.Unmarshal(b, want); err != nil {
				t.Fatalf("%s %#x: protobuf-go: %v", fd.Name(), v, err)
			}
			got := dynamicpb.NewMessage(desc)
			if err := Unmarshal(b, got); err != nil || !proto.Equal(got, want) {
				t.Errorf("%s %#x: got %v (%v), want %v", fd.Name(), v, got, err, want)
			}
		}
	}
}

// TestUnmarshalCopiesBytes: a bytes field owns its value; the caller may
// reuse the buffer it decoded from (gRPC recycles its buffers).
func TestUnmarshalCopiesBytes(t *testing.T) {
	desc := allKinds(t)
	fd := desc.Fields().ByName("sTYPE_BYTES")
	b := protowire.AppendTag(nil, fd.Number(), protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("abc"))
	m := dynamicpb.NewMessage(desc)
	if err := Unmarshal(b, m); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'z'
	}
	if got := m.Get(fd).Bytes(); string(got) != "abc" {
		t.Errorf("after the buffer was reused: %q, want %q", got, "abc")
	}
}
