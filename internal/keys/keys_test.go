package keys

import (
	"path"
	"strings"
	"testing"

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

// TestSettleKeys: a settlement record's keys never meet a state's: in
// memory they start apart from every Entry, in Redis they share the state
// key's hash slot but never match a Reset's scope pattern, and distinct
// idempotency keys, scopes or algorithms name distinct records.
func TestSettleKeys(t *testing.T) {
	ek := Entry("user:1", "p")
	if r := SettleEntry(1, ek, "id"); strings.HasPrefix(r, "\x00\x01") || r == Entry(r, "") || r == SettleEntry(1, ek, "id2") || r == SettleEntry(2, ek, "id") {
		t.Errorf("memory record %q collides", r)
	}
	// The entry is length-prefixed: moving bytes between it and the
	// idempotency key makes another record.
	if SettleEntry(1, "ab", "c") == SettleEntry(1, "a", "bc") {
		t.Error("entry and idempotency key are not kept apart")
	}
	tag := HashTag("user:1")
	rk := RedisSettle("fg:", algorithms.TokenBucket, tag, "p", "id")
	if Slot(tag) != Slot(hashTagOf(t, rk)) {
		t.Errorf("record %q is not in the state's slot", rk)
	}
	for _, alg := range []algorithms.Algorithm{algorithms.Unspecified, algorithms.TokenBucket} {
		pat := RedisScopesPattern("fg:", alg, tag)
		if ok, _ := path.Match(pat, rk); ok {
			t.Errorf("Reset's pattern %q matches the record %q", pat, rk)
		}
	}
	seen := map[string]bool{}
	for _, k := range []string{
		rk, RedisSettle("fg:", algorithms.TokenBucket, tag, "p", "id2"), RedisSettle("fg:", algorithms.TokenBucket, tag, "q", "id"),
		RedisSettle("fg:", algorithms.FixedWindow, tag, "p", "id"), RedisSettle("fg:", algorithms.TokenBucket, tag, "", "pid"),
	} {
		if seen[k] {
			t.Errorf("two records share %q", k)
		}
		seen[k] = true
	}
}

// hashTagOf is the text between the first '{' and the next '}' of a key.
func hashTagOf(t *testing.T, key string) string {
	t.Helper()
	i := strings.IndexByte(key, '{')
	j := strings.IndexByte(key[i+1:], '}')
	if i < 0 || j < 0 {
		t.Fatalf("no hash tag in %q", key)
	}
	return key[i+1 : i+1+j]
}
