package redisstore

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/algorithms"
)

func TestSlotSpecVector(t *testing.T) {
	// The cluster spec's CRC16 check value: CRC16("123456789") = 0x31C3.
	if got, want := slot("123456789"), 0x31C3%16384; got != want {
		t.Fatalf("slot(123456789) = %d, want %d", got, want)
	}
}

func TestHashTag(t *testing.T) {
	long := strings.Repeat("x", maxTagLen+1)
	tests := []struct{ key, want string }{
		{"user:42", "user:42"},
		{"", "%"},
		{"{a}", "%7Ba%7D"},
		{"a b", "a%20b"},
		{"100%", "100%25"},
		{"#1", "%231"},
		{"\x00\xff", "%00%FF"},
		{"é", "%C3%A9"},
		{strings.Repeat("x", maxTagLen), strings.Repeat("x", maxTagLen)},
		{long, "# and its SHA-256, checked below"},
	}
	for _, tc := range tests {
		got := hashTag(tc.key)
		if tc.key == long {
			if !strings.HasPrefix(got, "#") || len(got) != 65 {
				t.Errorf("hashTag(%d x's) = %q, want # and 64 hex digits", len(long), got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("hashTag(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
	if got := stateKey("fg:", algorithms.SlidingWindowLog, hashTag("{a}"), ""); got != "fg:swl2:{%7Ba%7D}" {
		t.Errorf("stateKey = %q", got)
	}
}

// TestHashTagInjective: distinct keys, including awkward bytes and keys
// that look like escapes or hashes, never share a tag, and no tag holds a
// brace or is empty.
func TestHashTagInjective(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("a{}%#7B \x00\xff")
	seen := map[string]string{}
	check := func(key string) {
		tag := hashTag(key)
		if tag == "" || strings.ContainsAny(tag, "{}") || len(tag) > maxTagLen+1 {
			t.Fatalf("hashTag(%q) = %q: empty, braced or too long", key, tag)
		}
		if other, ok := seen[tag]; ok && other != key {
			t.Fatalf("hashTag(%q) = hashTag(%q) = %q", key, other, tag)
		}
		seen[tag] = key
	}
	for range 50_000 {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		check(string(b))
	}
	for _, k := range []string{"", "%", "%25", "#", "%23", strings.Repeat("{", 50), strings.Repeat("{", 43)} {
		check(k)
	}
}

func BenchmarkHashTag(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = stateKey("fg:", algorithms.TokenBucket, hashTag("tenant-1/user:12345"), "")
	}
}

// TestSettleKeys: a settlement record shares the state key's hash slot but
// never matches a Reset's scope pattern, and distinct idempotency keys,
// scopes or algorithms name distinct records.
func TestSettleKeys(t *testing.T) {
	tag := hashTag("user:1")
	rk := settleKey("fg:", algorithms.TokenBucket, tag, "p", "id")
	if slot(tag) != slot(hashTagOf(t, rk)) {
		t.Errorf("record %q is not in the state's slot", rk)
	}
	for _, alg := range []algorithms.Algorithm{algorithms.Unspecified, algorithms.TokenBucket} {
		pat := scopesPattern("fg:", alg, tag)
		if ok, _ := path.Match(pat, rk); ok {
			t.Errorf("Reset's pattern %q matches the record %q", pat, rk)
		}
	}
	seen := map[string]bool{}
	for _, k := range []string{
		rk, settleKey("fg:", algorithms.TokenBucket, tag, "p", "id2"), settleKey("fg:", algorithms.TokenBucket, tag, "q", "id"),
		settleKey("fg:", algorithms.FixedWindow, tag, "p", "id"), settleKey("fg:", algorithms.TokenBucket, tag, "", "pid"),
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

// TestGlobEscape: the bytes Redis' glob patterns treat specially, and
// only those, are escaped with a backslash.
func TestGlobEscape(t *testing.T) {
	for c := range 256 {
		s, want := string([]byte{byte(c)}), string([]byte{byte(c)})
		if strings.IndexByte(`*?[]\^-`, byte(c)) >= 0 {
			want = `\` + s
		}
		if got := globEscape(s); got != want {
			t.Errorf("globEscape(%q) = %q, want %q", s, got, want)
		}
	}
}
