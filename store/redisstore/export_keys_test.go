package redisstore

import (
	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/keys"
)

// StateKey exposes the Redis key of key's state under alg (scope "") to
// the external tests, with the default prefix.
func StateKey(alg algorithms.Algorithm, key string) string {
	return keys.Redis(DefaultPrefix, alg, keys.HashTag(key), "")
}
