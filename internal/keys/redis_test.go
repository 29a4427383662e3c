package keys

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/algorithms"
)

func TestSlotSpecVector(t *testing.T) {
	// The cluster spec's CRC16 check value: CRC16("123456789") = 0x31C3.
	if got, want := Slot("123456789"), 0x31C3%16384; got != want {
		t.Fatalf("Slot(123456789) = %d, want %d", got, want)
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
		got := HashTag(tc.key)
		if tc.key == long {
			if !strings.HasPrefix(got, "#") || len(got) != 65 {
				t.Errorf("HashTag(%d x's) = %q, want # and 64 hex digits", len(long), got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("HashTag(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
	if got := redisStateKey("fg:", algorithms.SlidingWindowLog, HashTag("{a}")); got != "fg:swl2:{%7Ba%7D}" {
		t.Errorf("redisStateKey = %q", got)
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
		tag := HashTag(key)
		if tag == "" || strings.ContainsAny(tag, "{}") || len(tag) > maxTagLen+1 {
			t.Fatalf("HashTag(%q) = %q: empty, braced or too long", key, tag)
		}
		if other, ok := seen[tag]; ok && other != key {
			t.Fatalf("HashTag(%q) = HashTag(%q) = %q", key, other, tag)
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
		_ = redisStateKey("fg:", algorithms.TokenBucket, HashTag("tenant-1/user:12345"))
	}
}
