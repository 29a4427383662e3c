package memstore

import (
	"strings"
	"testing"
)

// TestSettleEntryKeys: a settlement record's key never meets a state's: it
// starts apart from every entryKey, and distinct idempotency keys or
// algorithms name distinct records.
func TestSettleEntryKeys(t *testing.T) {
	ek := entryKey("user:1", "p")
	if r := settleEntryKey(1, ek, "id"); strings.HasPrefix(r, "\x00\x01") || r == entryKey(r, "") || r == settleEntryKey(1, ek, "id2") || r == settleEntryKey(2, ek, "id") {
		t.Errorf("memory record %q collides", r)
	}
	// The entry is length-prefixed: moving bytes between it and the
	// idempotency key makes another record.
	if settleEntryKey(1, "ab", "c") == settleEntryKey(1, "a", "bc") {
		t.Error("entry and idempotency key are not kept apart")
	}
}

// TestEntryKeys: distinct (key, scope) pairs never share an entry, and a
// scoped entry gives its key back.
func TestEntryKeys(t *testing.T) {
	pairs := [][2]string{{"a", ""}, {"", "a"}, {"\x00a", ""}, {"a", "b"}, {"ab", ""}, {"b", "a"}, {"", ""}, {"\x00\x01", ""}}
	seen := map[string][2]string{}
	for _, p := range pairs {
		ek := entryKey(p[0], p[1])
		if q, dup := seen[ek]; dup {
			t.Errorf("%q and %q share the entry %q", p, q, ek)
		}
		seen[ek] = p
		k, ok := entryKeyOf(ek)
		if ok != (p[1] != "") || (ok && k != p[0]) {
			t.Errorf("entryKeyOf(entryKey(%q, %q)) = %q, %v", p[0], p[1], k, ok)
		}
	}
}
