package keys

import "testing"

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
