package memstore

import (
	"encoding/binary"
	"strings"
)

// entryKey is the map key of key's state in scope: one string per (key,
// scope), distinct pairs never equal, and no allocation for the scope ""
// (the Envoy API's) unless key begins with a zero byte:
//
//	scope "", key not starting with 0x00:  key
//	scope "", key starting with 0x00:      0x00 0x00 key
//	scope s != "":                         0x00 0x01 len(s) (4 bytes) s key
//
// The first bytes tell the forms apart, and the length bounds the scope.
func entryKey(key, scope string) string {
	if scope == "" {
		if key == "" || key[0] != 0 {
			return key
		}
		return "\x00\x00" + key
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(scope)))
	return "\x00\x01" + string(n[:]) + scope + key
}

// entryKeyOf reports the key of a scoped entry key (the third form of
// entryKey), or false for the other forms.
func entryKeyOf(ek string) (string, bool) {
	if len(ek) < 6 || !strings.HasPrefix(ek, "\x00\x01") {
		return "", false
	}
	n := int(binary.BigEndian.Uint32([]byte(ek[2:6])))
	if 6+n > len(ek) {
		return "", false
	}
	return ek[6+n:], true
}

// settleEntryKey is the memory store's key of a settlement record: the
// state entry ek (entryKey) of algorithm alg and the settlement's
// idempotency key, kept apart from every Entry (it starts with "\x00\x02")
// and from each other whatever bytes they hold (ek is length-prefixed).
func settleEntryKey(alg byte, ek, idempotencyKey string) string {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(ek)))
	return "\x00\x02" + string(alg) + string(n[:]) + ek + idempotencyKey
}
