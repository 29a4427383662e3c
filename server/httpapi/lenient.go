package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
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

// frame is one open object or array while walking the body.
type frame struct {
	msg     protoreflect.MessageDescriptor // object: the message it encodes; nil when unknown
	array   bool
	list    protoreflect.FieldDescriptor // array: the repeated field it encodes
	wantKey bool                         // object: the next string is a key
	field   protoreflect.FieldDescriptor // object: the field the last key named
}

// lenientEdits walks body's tokens and lists the string values to
// rewrite, in order.
func lenientEdits(body []byte, md protoreflect.MessageDescriptor) []edit {
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []*frame
	var edits []edit
	top := func() *frame {
		if len(stack) == 0 {
			return nil
		}
		return stack[len(stack)-1]
	}
	// valueField is the field the next value belongs to.
	valueField := func() protoreflect.FieldDescriptor {
		switch f := top(); {
		case f == nil:
			return nil
		case f.array:
			return f.list
		default:
			return f.field
		}
	}
	// valueDone marks the current object's value read.
	valueDone := func() {
		if f := top(); f != nil && !f.array {
			f.wantKey, f.field = true, nil
		}
	}
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return edits
		}
		if err != nil {
			return nil // protojson explains the syntax error
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				var msg protoreflect.MessageDescriptor
				if len(stack) == 0 {
					msg = md
				} else if fd := valueField(); fd != nil && fd.Kind() == protoreflect.MessageKind && !fd.IsMap() {
					msg = fd.Message()
				}
				stack = append(stack, &frame{msg: msg, wantKey: true})
			case '[':
				var list protoreflect.FieldDescriptor
				if fd := valueField(); fd != nil && fd.IsList() {
					list = fd
				}
				stack = append(stack, &frame{array: true, list: list})
			default: // '}' or ']'
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			f := top()
			if f != nil && !f.array && f.wantKey {
				f.wantKey, f.field = false, nil
				if f.msg != nil {
					f.field = fieldByName(f.msg, t)
				}
				continue
			}
			if fd := valueField(); fd != nil {
				if v, ok := respell(fd, t); ok {
					// Between the previous token and this string there is
					// only whitespace, ':' or ',': its first quote opens it.
					if start := bytes.IndexByte(body[before:], '"'); start >= 0 {
						edits = append(edits, edit{start: int(before) + start, end: int(dec.InputOffset()), value: v})
					}
				}
			}
			valueDone()
		default:
			valueDone()
		}
	}
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
	if protojsonDuration(s) {
		return "", false
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return "", false // protojson explains what it expected
	}
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	secs, nanos := int64(d/time.Second), int64(d%time.Second)
	if nanos == 0 {
		return sign + strconv.FormatInt(secs, 10) + "s", true
	}
	frac := strings.TrimRight(strconv.FormatInt(nanos+int64(time.Second), 10)[1:], "0")
	return sign + strconv.FormatInt(secs, 10) + "." + frac + "s", true
}

// protojsonDuration reports whether s has protojson's Duration form: an
// optional minus, digits, an optional fraction, and "s".
func protojsonDuration(s string) bool {
	num, ok := strings.CutSuffix(s, "s")
	if !ok {
		return false
	}
	num = strings.TrimPrefix(num, "-")
	whole, frac, _ := strings.Cut(num, ".")
	const digits = "0123456789"
	return whole != "" && strings.Trim(whole, digits) == "" && strings.Trim(frac, digits) == ""
}
