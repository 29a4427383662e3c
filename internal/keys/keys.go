// Package keys owns the store keys the APIs build from a request: what a
// decision API hands the store as store.Request.Key and Scope. How a store
// names the state of a store key is the store's own business
// (store/memstore's entry keys, store/redisstore's Redis keys).
//
// # Store keys (what an API hands the store)
//
// The first byte names the API's namespace, so no two APIs ever share a
// count, whatever their callers send:
//
//	Check API        'k' key                                          (Check)
//	Envoy rule       'e' LimitID(rule id) field(value)...             (AppendEnvoy, AppendField, AppendShared)
//	Envoy override   'o' field(domain) requests '/' unit field(key) field(value)...   (AppendOverride)
//	shared override  'O' field(domain) unit field(key) field(value)...   (AppendOverrideUnit)
//
// A field is a value length-prefixed ('|', its length in decimal, ':',
// the bytes), so fields never run together; a value longer than
// MaxLiteralField bytes is written as its digest instead ('#' and the 43
// base64url characters of its SHA-256), so a store key stays short
// whatever a client sends, and a digest never reads as a literal field; a share_threshold level's
// value is left out and written "|*" (AppendShared). A limit's count is
// further named by store.Request.Scope (PolicyScope: "p" and the policy's
// name; InlineScope: "i" and an inline limit's numbers), which the stores
// keep apart from the key.
package keys

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
)

// The namespace bytes heading store keys.
const (
	checkNS    = 'k'
	envoyNS    = 'e'
	overrideNS = 'o'
	// unitNS heads an override counted per unit, whatever its rate.
	unitNS = 'O'
)

// MaxLiteralField is the longest field written as its bytes; a longer one
// is written as its SHA-256 (AppendField).
const MaxLiteralField = 256

// Check is the store key of a Check API key.
func Check(key string) string { return string(checkNS) + key }

// CheckKey is the caller's key of a Check API store key (Check's
// inverse); "" for another API's key.
func CheckKey(storeKey string) string {
	if len(storeKey) == 0 || storeKey[0] != checkNS {
		return ""
	}
	return storeKey[1:]
}

// AppendEnvoy appends the head of an Envoy rule's store key to dst: the
// namespace byte and the rule's LimitID. The descriptor's values follow,
// each through AppendField or AppendShared.
func AppendEnvoy(dst []byte, limitID string) []byte {
	dst = append(dst, envoyNS)
	return append(dst, limitID...)
}

// AppendField appends s length-prefixed, so fields never run together;
// when s is longer than MaxLiteralField, '#' and its SHA-256 in base64url
// instead. Two distinct values share a field only if their SHA-256 do.
func AppendField(dst []byte, s string) []byte {
	if len(s) > MaxLiteralField {
		sum := sha256.Sum256([]byte(s))
		dst = append(dst, '#')
		return base64.RawURLEncoding.AppendEncode(dst, sum[:])
	}
	dst = append(dst, '|')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, ':')
	return append(dst, s...)
}

// AppendShared appends the stand-in of a share_threshold level's value,
// which does not take part in the key.
func AppendShared(dst []byte) []byte { return append(dst, "|*"...) }

// AppendOverride appends the head of the store key of an Envoy request's
// own limit (a descriptor's limit override) to dst: the namespace byte,
// the domain, and the override's rate. The descriptor's entries follow,
// key and value each through AppendField.
func AppendOverride(dst []byte, domain string, requests uint32, unit int32) []byte {
	dst = append(dst, overrideNS)
	dst = AppendField(dst, domain)
	dst = strconv.AppendUint(dst, uint64(requests), 10)
	dst = append(dst, '/')
	return strconv.AppendInt(dst, int64(unit), 10)
}

// AppendOverrideUnit appends the head of the store key of an Envoy
// request's own limit counted per unit (so that a changed rate keeps its
// count, as envoyproxy/ratelimit counts): the namespace byte, the domain
// and the override's unit. The descriptor's entries follow, key and value
// each through AppendField.
func AppendOverrideUnit(dst []byte, domain string, unit int32) []byte {
	dst = append(dst, unitNS)
	dst = AppendField(dst, domain)
	return strconv.AppendInt(dst, int64(unit), 10)
}

// LimitID is the short, fixed-length stand-in for a rule's ID (rules'
// Limit.ID) at the head of its Envoy store keys: 16 base64url characters
// (96 bits) of its SHA-256. Store keys stay short whatever the rule's
// path (a Redis key of a three-integer state costs under 100 bytes), and two rules
// collide with probability 2^-96 per pair.
func LimitID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}
