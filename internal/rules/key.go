package rules

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
)

// This file owns how a limit names its counters: its ID, the digest that
// heads its store keys, and the encoding of the request's values.

// AppendKey appends to dst the store key of entries under l: a 16-byte
// digest of l.ID (keeping keys short, see keyID), then for every entry its
// value as an AppendField (so no two distinct descriptors ever share a
// key, whatever bytes their values hold), with the values of
// share_threshold levels left out ("|*"). entries must be a descriptor that Match
// resolved to l. It does not allocate when dst has room.
func (l *Limit) AppendKey(dst []byte, entries []Entry) []byte {
	dst = append(dst, l.keyID...)
	for i, e := range entries {
		if l.Shared(i) {
			dst = append(dst, "|*"...)
			continue
		}
		dst = AppendField(dst, e.Value)
	}
	return dst
}

// AppendField appends s to dst length-prefixed, as "|len:s", so that
// fields never run together: no two distinct lists of fields encode
// alike, whatever bytes they hold. Store keys built from request values
// use it (AppendKey, and the Envoy API's per-request limits). It does not
// allocate when dst has room.
func AppendField(dst []byte, s string) []byte {
	dst = append(dst, '|')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, ':')
	return append(dst, s...)
}

// keyID is the short, fixed-length stand-in for id at the head of store
// keys: 16 base64url characters (96 bits) of its SHA-256. Store keys stay
// short whatever the rule's path (a Redis token-bucket key costs under 100
// bytes), and two rules collide with probability 2^-96 per pair.
func keyID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// limitID is the Limit.ID: the domain, every level's key (and value) quoted,
// and the index.
func limitID(domain string, path []level, i int) string {
	var b strings.Builder
	b.WriteString(strconv.Quote(domain))
	for _, lv := range path {
		b.WriteByte('/')
		b.WriteString(strconv.Quote(lv.key))
		if lv.value != "" {
			b.WriteByte('=')
			b.WriteString(strconv.Quote(lv.value))
		}
	}
	b.WriteByte('#')
	b.WriteString(strconv.Itoa(i))
	return b.String()
}
