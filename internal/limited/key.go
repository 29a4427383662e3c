package limited

import (
	"hash"
	"hash/maphash"

	"github.com/floodgate/floodgate/internal/rules"
)

// keySource is a decision's key as the tables read it, without building
// it as one string: its hash, its text for display, and its bytes for the
// keyed hash.
type keySource interface {
	hash() uint64
	// text copies the key's display text into dst, as much as fits, and
	// says whether it was cut.
	text(dst []byte) (n int, truncated bool)
	// mac writes the key's whole text to h through scratch (no
	// allocation).
	mac(h hash.Hash, scratch []byte)
}

// checkKey is a Check API key.
type checkKey struct {
	seed maphash.Seed
	key  string
}

func (k checkKey) hash() uint64 { return maphash.String(k.seed, k.key) }

func (k checkKey) text(dst []byte) (int, bool) {
	n := copy(dst, k.key)
	return n, n < len(k.key)
}

func (k checkKey) mac(h hash.Hash, scratch []byte) { writeString(h, scratch, k.key) }

// envoyKey is an Envoy descriptor: its entries, shown "key=value, key2=value2".
type envoyKey struct {
	seed    maphash.Seed
	entries []rules.Entry
}

func (k envoyKey) hash() uint64 {
	h := uint64(len(k.entries))
	for _, e := range k.entries {
		h = mix(h, maphash.String(k.seed, e.Key))
		h = mix(h, maphash.String(k.seed, e.Value))
	}
	return h
}

func (k envoyKey) text(dst []byte) (int, bool) {
	n := 0
	put := func(s string) bool {
		c := copy(dst[n:], s)
		n += c
		return c == len(s)
	}
	for i, e := range k.entries {
		if i > 0 && !put(", ") || !put(e.Key) || !put("=") || !put(e.Value) {
			return n, true
		}
	}
	return n, false
}

func (k envoyKey) mac(h hash.Hash, scratch []byte) {
	for i, e := range k.entries {
		if i > 0 {
			writeString(h, scratch, ", ")
		}
		writeString(h, scratch, e.Key)
		writeString(h, scratch, "=")
		writeString(h, scratch, e.Value)
	}
}

// writeString writes s to h in pieces copied to scratch, so that no
// []byte is made of s.
func writeString(h hash.Hash, scratch []byte, s string) {
	for len(s) > 0 {
		n := copy(scratch, s)
		_, _ = h.Write(scratch[:n])
		s = s[n:]
	}
}
