package redisstore

import (
	"github.com/floodgate/floodgate/algorithms"
)

// StateKey exposes the Redis key of key's state under alg (scope "") to
// the external tests, with the default prefix.
func StateKey(alg algorithms.Algorithm, key string) string {
	return KeyName(DefaultPrefix, alg, key)
}
