package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The spellings people type, read here in one place before protojson's
// strict decoding:
//
//   - an enum value by its proto name (CALENDAR_MONTH), without the
//     enum's prefix (MONTH), in lower case (calendar_month, month) or with
//     hyphens (calendar-month);
//   - a google.protobuf.Duration in Go's form, as the CLI and the config
//     file take it ("1m", "90s", "1h30m", "250ms"), beside protojson's
//     "60s" and "0.25s".
//
// Every other byte of the body is left as sent, so protojson's errors
// (unknown fields, syntax) still point where they did.

// lenient returns body with the lenient spellings of md's enum and
// Duration fields (nested and repeated ones too) rewritten into
// protojson's. A body that is not valid JSON comes back as it was, for
// protojson to explain.
func lenient(body []byte, md protoreflect.MessageDescriptor) []byte {
	edits := lenientEdits(body, md)
	if len(edits) == 0 {
		return body
	}
	out := make([]byte, 0, len(body)+16)
	last := 0
	for _, e := range edits {
		out = append(out, body[last:e.start]...)
		out = strconv.AppendQuote(out, e.value)
		last = e.end
	}
	return append(out, body[last:]...)
}

// edit replaces body[start:end], a JSON string, by value.
type edit struct {
	start, end int
	value      string
}

// lenientEdits walks body's tokens and lists the string values to
// rewrite, in order.
func lenientEdits(body []byte, md protoreflect.MessageDescriptor) []edit {
	dec := json.NewDecoder(bytes.NewReader(body))
	var edits []edit
	for {
		err := walk(dec, body, nil, md, &edits)
		if errors.Is(err, io.EOF) {
			return edits
		}
		if err != nil {
			return nil // protojson explains the syntax error
		}
	}
}

// walk reads the next value from dec, a value of field fd (nil when
// unknown) or, an object, of message msg (nil when unknown), and appends
// the edits of its strings.
func walk(dec *json.Decoder, body []byte, fd protoreflect.FieldDescriptor, msg protoreflect.MessageDescriptor, edits *[]edit) error {
	before := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim: // '{' or '['; walk reads the closing one
		for dec.More() {
			vfd := fd
			if t == '{' {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				vfd = nil
				if name, ok := key.(string); ok && msg != nil {
					vfd = fieldByName(msg, name)
				}
			} else if fd != nil && !fd.IsList() {
				vfd = nil
			}
			var vmsg protoreflect.MessageDescriptor
			if vfd != nil && vfd.Kind() == protoreflect.MessageKind && !vfd.IsMap() {
				vmsg = vfd.Message()
			}
			if err := walk(dec, body, vfd, vmsg, edits); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case string:
		if fd == nil {
			return nil
		}
		if v, ok := respell(fd, t); ok {
			// Between the previous token and this string there is only
			// whitespace, ':' or ',': its first quote opens it.
			if start := bytes.IndexByte(body[before:], '"'); start >= 0 {
				*edits = append(*edits, edit{start: int(before) + start, end: int(dec.InputOffset()), value: v})
			}
		}
	}
	return nil
}

// fieldByName finds md's field by its JSON (lowerCamel) or proto name, as
// protojson does.
func fieldByName(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByJSONName(name); fd != nil {
		return fd
	}
	return md.Fields().ByTextName(name)
}

// respell is s, a value of fd, in protojson's spelling, and whether that
// differs from s.
func respell(fd protoreflect.FieldDescriptor, s string) (string, bool) {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		return enumName(fd.Enum(), s)
	case protoreflect.MessageKind:
		if fd.Message().FullName() == "google.protobuf.Duration" {
			return durationJSON(s)
		}
	}
	return "", false
}

// enumName is the proto name of ed's value spelled s: as is, in upper
// case, with hyphens as underscores, with or without the prefix its zero
// value carries (ALGORITHM_ of ALGORITHM_UNSPECIFIED).
func enumName(ed protoreflect.EnumDescriptor, s string) (string, bool) {
	values := ed.Values()
	if values.ByName(protoreflect.Name(s)) != nil {
		return "", false
	}
	up := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	if values.ByName(protoreflect.Name(up)) != nil {
		return up, true
	}
	if values.Len() > 0 {
		zero := string(values.Get(0).Name())
		if prefix, ok := strings.CutSuffix(zero, "UNSPECIFIED"); ok && prefix != "" {
			if values.ByName(protoreflect.Name(prefix+up)) != nil {
				return prefix + up, true
			}
		}
	}
	return "", false // protojson names the value it does not know
}

// durationJSON is s, a duration in Go's form ("1m", "1h30m", "250ms"), as
// protojson's seconds ("60s", "5400s", "0.250s"). A string protojson
// takes as it is, or that is no Go duration, is left alone.
func durationJSON(s string) (string, bool) {
	if protojson.Unmarshal([]byte(strconv.Quote(s)), new(durationpb.Duration)) == nil {
		return "", false
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return "", false // protojson explains what it expected
	}
	b, _ := protojson.Marshal(durationpb.New(d)) // every time.Duration is in its range
	return strings.Trim(string(b), `"`), true
}
