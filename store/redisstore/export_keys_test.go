package redisstore

import (
	"strconv"

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

// windowEpochMs is lua/lib.lua's STATE_EPOCH_MS, 2026-01-01T00:00:00Z:
// window keys name their window's end in ms after it.
const windowEpochMs = 1767225600000

// windowKey is the key lua/fixed_window.lua counts the window ending at
// endMs (Unix ms) of the state key base in.
func windowKey(base string, endMs int64) string {
	return base + "#" + strconv.FormatInt(endMs-windowEpochMs, 10)
}
