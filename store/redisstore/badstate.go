package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
)

// stateError is a request whose key holds a value no script of this
// store writes (set by hand, or by another program under the prefix):
// that request's group decided and wrote nothing, the other requests
// batched with it were decided as usual. It names the key by its
// SHA-256 only, since a key holds a caller's own value.
type stateError struct {
	index int    // the request's place in its call
	key   string // the Redis key, once known
}

func (e *stateError) Error() string {
	return "redisstore: a malformed state at the Redis key " + keyHash(e.key) + " (or at one of its window keys, '#' and a number after it: a value no script of this store writes): its decisions fail until the key expires or is deleted"
}

// keyHash names a Redis key in logs without its bytes: "sha256:" and the
// first 16 hex digits of its SHA-256 (redis-cli --scan piped through
// sha256sum finds it).
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:8])
}
