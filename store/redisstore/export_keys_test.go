package redisstore

import (
	"github.com/floodgate/floodgate/algorithms"
)

// StateKey exposes the Redis key of key's state under alg (scope "") to
// the external tests, with the default prefix.
func StateKey(alg algorithms.Algorithm, key string) string {
	return KeyName(DefaultPrefix, alg, key)
}

// WindowKey exposes the Redis key of the window ending at endMs (Unix
// ms) of key's state under alg (windowKey), with the default prefix.
func WindowKey(alg algorithms.Algorithm, key string, endMs int64) string {
	return windowKey(StateKey(alg, key), endMs)
}
