package keys

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

func TestNamespacesNeverMeet(t *testing.T) {
	// A Check key chosen to look like an Envoy or override key still
	// differs from it: the namespace byte comes first.
	envoy := string(AppendField(AppendEnvoy(nil, "ID"), "v"))
	override := string(AppendField(AppendOverride(nil, "d", 10, 2), "k"))
	for _, k := range []string{envoy, override, envoy[1:], override[1:]} {
		if Check(k) == envoy || Check(k) == override {
			t.Errorf("Check(%q) = %q meets another API's key", k, Check(k))
		}
	}
	if envoy[0] == override[0] || envoy[0] == Check("")[0] || override[0] == Check("")[0] {
		t.Errorf("namespaces share a byte: %q %q %q", envoy[0], override[0], Check("")[0])
	}
}

func TestFieldsNeverRunTogether(t *testing.T) {
	tests := []struct {
		a, b []string
	}{
		{[]string{"ab", "c"}, []string{"a", "bc"}},
		{[]string{"a|1:b"}, []string{"a", "b"}},
		{[]string{""}, []string{}},
		{[]string{"*"}, nil}, // a value "*" is not the shared stand-in
	}
	for _, tc := range tests {
		var x, y []byte
		for _, s := range tc.a {
			x = AppendField(x, s)
		}
		if tc.b == nil {
			y = AppendShared(y)
		}
		for _, s := range tc.b {
			y = AppendField(y, s)
		}
		if string(x) == string(y) {
			t.Errorf("%q and %q give one key %q", tc.a, tc.b, x)
		}
	}
	if got := string(AppendOverride(nil, "edge", 100, 2)); got != "o|4:edge100/2" {
		t.Errorf("AppendOverride = %q, want o|4:edge100/2", got)
	}
}

// TestAppendField: length-prefixed fields never run together.
func TestAppendField(t *testing.T) {
	enc := func(fields ...string) string {
		var b []byte
		for _, f := range fields {
			b = AppendField(b, f)
		}
		return string(b)
	}
	if got, want := enc("ab", ""), "|2:ab|0:"; got != want {
		t.Errorf("encoding = %q, want %q", got, want)
	}
	lists := [][]string{{"a|1:b"}, {"a", "b"}, {"a|1:", ""}, {"", ""}, {""}, {}, {"1:"}, {"|0:"}}
	seen := map[string][]string{}
	for _, l := range lists {
		k := enc(l...)
		if prev, dup := seen[k]; dup {
			t.Errorf("%q and %q encode alike: %q", prev, l, k)
		}
		seen[k] = l
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = AppendField(buf[:0], "value") }); n != 0 {
		t.Errorf("AppendField allocates %v times", n)
	}
}

func TestCheckKey(t *testing.T) {
	for _, tt := range []struct{ store, want string }{
		{Check("alice"), "alice"},
		{Check(""), ""},
		{Check("k\xff"), "k\xff"},
		{string(AppendEnvoy(nil, "shop")), ""},
		{"", ""},
	} {
		if got := CheckKey(tt.store); got != tt.want {
			t.Errorf("CheckKey(%q) = %q, want %q", tt.store, got, tt.want)
		}
	}
}

func TestIsInlineScope(t *testing.T) {
	inline := InlineScope(algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute})
	for _, tt := range []struct {
		scope string
		want  bool
	}{{inline, true}, {PolicyScope("inline"), false}, {PolicyScope("i"), false}, {"", false}} {
		if got := IsInlineScope(tt.scope); got != tt.want {
			t.Errorf("IsInlineScope(%q) = %v, want %v", tt.scope, got, tt.want)
		}
	}
}
