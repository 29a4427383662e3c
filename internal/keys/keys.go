// Package keys owns the store keys the APIs build from a request
// (store.Request.Key and Scope). The first byte names the API's namespace,
// so no two APIs ever share a count, whatever their callers send:
//
//	Check API        'k' key                                          (Check)
//	Envoy rule       'e' LimitID(rule id) field(value)...             (AppendEnvoy, AppendField, AppendShared)
//	Envoy override   'o' field(domain) requests '/' unit field(key) field(value)...   (AppendOverride)
//	shared override  'O' field(domain) unit field(key) field(value)...   (AppendOverrideUnit)
//
// A field is written by AppendField. A limit's count is further named by
// store.Request.Scope (PolicyScope, InlineScope), kept apart from the key.
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

// maxLiteralField is the longest field written as its bytes; a longer one
// is written as its SHA-256 (AppendField).
const maxLiteralField = 256

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

// AppendEnvoy appends the head of an Envoy rule's store key: the
// namespace byte and the rule's LimitID.
func AppendEnvoy(dst []byte, limitID string) []byte {
	dst = append(dst, envoyNS)
	return append(dst, limitID...)
}

// AppendField appends s length-prefixed ('|', the length, ':', the
// bytes), so fields never run together; when s is longer than
// maxLiteralField, '#' and its SHA-256 in base64url instead, so a store
// key stays short whatever a client sends.
func AppendField(dst []byte, s string) []byte {
	if len(s) > maxLiteralField {
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

// AppendOverride appends the head of the store key of a descriptor's
// limit override: the namespace byte, the domain and the override's rate.
// The entries follow, through AppendField.
func AppendOverride(dst []byte, domain string, requests uint32, unit int32) []byte {
	dst = append(dst, overrideNS)
	dst = AppendField(dst, domain)
	dst = strconv.AppendUint(dst, uint64(requests), 10)
	dst = append(dst, '/')
	return strconv.AppendInt(dst, int64(unit), 10)
}

// AppendOverrideUnit is AppendOverride counted per unit, so that a
// changed rate keeps its count (as envoyproxy/ratelimit counts).
func AppendOverrideUnit(dst []byte, domain string, unit int32) []byte {
	dst = append(dst, unitNS)
	dst = AppendField(dst, domain)
	return strconv.AppendInt(dst, int64(unit), 10)
}

// LimitID is the fixed-length stand-in for a rule's ID at the head of its
// Envoy store keys: 96 bits of its SHA-256 in base64url, so store keys stay
// short whatever the rule's path.
func LimitID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}
