package redisstore

// The Redis keys of the store, its one owner:
//
//	state       <prefix><algorithm>:{<tag>}[:<scope>]   (stateKey)
//	window      <state>#<end>                          (a window's count, windowKeyed)
//	settlement  <prefix>settle:{<tag>}/<hash>           (settleKey)
//
// where tag is hashTag(store key), so every key of one store key (all its
// scopes, its settlement records) is in one Redis Cluster slot (slot), and
// algorithm is the algorithm's short name (algorithms.Facts.Redis).

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"

	"github.com/floodgate/floodgate/algorithms"
)

// maxTagLen bounds the hash tag an escaped key may use; longer keys are
// hashed.
const maxTagLen = 128

// hashTag is the text between the braces of key's Redis keys: key with
// every byte but plain ones as %XX (uppercase hex), or, when that is
// longer than maxTagLen, "#" and its SHA-256 in hex. Escaping is
// injective and '#' never starts an escaped key, so distinct keys never
// share a tag, and a tag holds no braces, so it cannot end early.
func hashTag(key string) string {
	if key == "" {
		return "%" // escape never yields a lone "%"
	}
	n := 0
	for i := 0; i < len(key); i++ {
		if plain(key[i]) {
			n++
		} else {
			n += 3
		}
	}
	if n > maxTagLen {
		sum := sha256.Sum256([]byte(key))
		return "#" + hex.EncodeToString(sum[:])
	}
	if n == len(key) {
		return key
	}
	const digits = "0123456789ABCDEF"
	b := make([]byte, 0, n)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if plain(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', digits[c>>4], digits[c&15])
		}
	}
	return string(b)
}

// plain reports whether c stands for itself in a hash tag: printable ASCII
// but the braces (which would end or nest the tag), '%' (the escape) and
// '#' (the hashed form's marker).
func plain(c byte) bool {
	return c > ' ' && c < 0x7f && c != '{' && c != '}' && c != '%' && c != '#'
}

// stateKey is the Redis key holding key's state under alg in scope:
// <prefix><algorithm>:{<tag>}, then, unless scope is "", ':' and the scope
// escaped like a hash tag. The scope comes after the closing brace, so
// every scope of a key is in the key's Slot, and a tag (which holds no
// braces) cannot run into it: distinct (key, scope) pairs never share a
// Redis key.
func stateKey(prefix string, alg algorithms.Algorithm, tag, scope string) string {
	k := prefix + alg.Facts().Redis + ":{" + tag + "}"
	if scope == "" {
		return k
	}
	return k + ":" + hashTag(scope)
}

// scopesPattern is the SCAN MATCH pattern of key's keys in every
// non-empty scope under alg, or under every algorithm when alg is
// algorithms.Unspecified.
func scopesPattern(prefix string, alg algorithms.Algorithm, tag string) string {
	if alg == algorithms.Unspecified {
		return globEscape(prefix) + "*:{" + globEscape(tag) + "}:*"
	}
	return globEscape(stateKey(prefix, alg, tag, "")) + ":*"
}

// globEscape escapes the characters Redis' glob patterns treat specially.
var globEscape = strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`, `\`, `\\`, `^`, `\^`, `-`, `\-`).Replace

// slot is the Redis Cluster hash Slot of a key whose hash tag is tag
// (non-empty, without braces): CRC16-XMODEM(tag) mod 16384.
func slot(tag string) int {
	crc := uint16(0)
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// settleKey is the Redis key of a settlement record: in the hash slot
// of the state key stateKey(prefix, alg, tag, scope) (the same {tag}), named
// by a hash of the algorithm, scope and idempotency key, so its length is
// bounded and it never matches scopesPattern (a Reset of every scope
// leaves the records: a retry after a Reset still charges nothing).
func settleKey(prefix string, alg algorithms.Algorithm, tag, scope, idempotencyKey string) string {
	h := sha256.New()
	var n [8]byte
	n[0] = byte(alg)
	binary.BigEndian.PutUint32(n[4:], uint32(len(scope)))
	h.Write(n[:])
	h.Write([]byte(scope))
	h.Write([]byte(idempotencyKey))
	return prefix + "settle:{" + tag + "}/" + hex.EncodeToString(h.Sum(nil)[:16])
}

// KeyName is the Redis key that holds the state of the store key key under
// alg, for a store whose Config.Prefix is prefix, in the scope "" (the Envoy
// API's counts): what `floodgate config explain` shows an operator looking
// for a rule's key in Redis. The layout may change between releases.
func KeyName(prefix string, alg algorithms.Algorithm, key string) string {
	return stateKey(prefix, alg, hashTag(key), "")
}

// windowKeyed reports whether alg keeps each window's count in a key of
// its own: the state key, then '#' and the window's end in ms after
// lua/lib.lua's STATE_EPOCH_MS (lua/fixed_window.lua), in the state key's
// slot. An
// algorithm whose count starts afresh at each window's boundary
// (algorithms.Facts.Afresh) does: nothing of a window outlives it. The
// end, not the start, names the key, so its expiry (the end plus keep)
// follows from its name whichever limit created it.
func windowKeyed(alg algorithms.Algorithm) bool { return alg.Facts().Afresh }

// windowsPattern is the SCAN MATCH pattern of every window key of the
// state key base.
func windowsPattern(base string) string { return globEscape(base) + "#*" }
