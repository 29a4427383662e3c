package sfv_test

import (
	"reflect"
	"testing"

	"github.com/floodgate/floodgate/internal/testkit/sfv"
)

func TestParseList(t *testing.T) {
	tests := []struct {
		in   string
		want []sfv.Item
	}{
		{`"a";q=10;w=60`, []sfv.Item{{Value: "a", Params: []sfv.Param{{"q", int64(10)}, {"w", int64(60)}}}}},
		{`3, 3;w=3600`, []sfv.Item{{Value: int64(3)}, {Value: int64(3), Params: []sfv.Param{{"w", int64(3600)}}}}},
		{`"a\"b\\c";r=0`, []sfv.Item{{Value: `a"b\c`, Params: []sfv.Param{{"r", int64(0)}}}}},
		{`tok/en, ?1;x, :aGk=:, 1.5`, []sfv.Item{{Value: sfv.Token("tok/en")}, {Value: true, Params: []sfv.Param{{"x", true}}}, {Value: []byte("hi")}, {Value: 1.5}}},
		{`(1 2);a=1`, []sfv.Item{{Value: []sfv.Item{{Value: int64(1)}, {Value: int64(2)}}, Params: []sfv.Param{{"a", int64(1)}}}}},
		{``, nil},
	}
	for _, tc := range tests {
		got, err := sfv.ParseList(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseList(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
}

// TestParseListRejects: what Go's strconv.Quote and sloppy formatting
// produce is not a Structured Field.
func TestParseListRejects(t *testing.T) {
	for _, in := range []string{
		`"caf` + "\u00e9" + `"`, // raw UTF-8
		`"a\x00"`,               // strconv.Quote's escapes
		`"a\u00e9"`,
		`"a\tb"`,
		`"unterminated`,
		`1,`,
		`1,,2`,
		`"a";Q=1`, // keys are lower case
		`"a";q=`,
		`1234567890123456`, // 16 digits
		`1.2345`,
		`1.`,
		`a b`,
		`%"x"`,
		`(1 2`,
	} {
		if got, err := sfv.ParseList(in); err == nil {
			t.Errorf("ParseList(%q) = %#v, want an error", in, got)
		}
	}
}

func TestParseItem(t *testing.T) {
	if it, err := sfv.ParseItem("42"); err != nil || it.Value != int64(42) {
		t.Fatalf("ParseItem(42) = %v, %v", it, err)
	}
	for _, in := range []string{"42, 43", "-", "4 2", ""} {
		if _, err := sfv.ParseItem(in); err == nil {
			t.Errorf("ParseItem(%q): no error", in)
		}
	}
}
