package rules

import (
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/internal/keys"
)

// This file holds how a limit names its counters: its ID, and its store
// keys in package keys' layout.

// AppendKey appends to dst the store key of entries under l, in the
// layout package keys owns: the Envoy namespace and l's LimitID digest,
// then for every entry its value as a field (so no two distinct
// descriptors ever share a key, whatever bytes their values hold), with
// the values of share_threshold levels left out, and the values of
// `match: cidr` levels as canonical addresses (so every spelling of one
// address shares its counter). entries must be a descriptor that Match
// resolved to l. It does not allocate when dst has room (and addresses
// come in canonical form).
func (l *Limit) AppendKey(dst []byte, entries []Entry) []byte {
	if n := len(l.path); len(entries) > n {
		entries = entries[:n] // a charge: after limit counts under its parent's key
	}
	dst = keys.AppendEnvoy(dst, l.keyID)
	for i, e := range entries {
		if l.Shared(i) {
			dst = keys.AppendShared(dst)
			continue
		}
		if i < len(l.path) && l.path[i].cidr {
			dst = appendAddrField(dst, e.Value)
			continue
		}
		dst = keys.AppendField(dst, e.Value)
	}
	return dst
}

// limitID is the Limit.ID: the domain, every level's key (and value) quoted,
// and the index. A `match: cidr` value follows '~' instead of '=', so it
// is never confused with an exact value of the same text.
func limitID(domain string, path []level, i int) string {
	var b strings.Builder
	b.WriteString(strconv.Quote(domain))
	for _, lv := range path {
		b.WriteByte('/')
		b.WriteString(strconv.Quote(lv.key))
		if lv.cidr {
			b.WriteByte('~')
			b.WriteString(strconv.Quote(lv.value))
		} else if lv.value != "" {
			b.WriteByte('=')
			b.WriteString(strconv.Quote(lv.value))
		}
	}
	b.WriteByte('#')
	b.WriteString(strconv.Itoa(i))
	return b.String()
}
