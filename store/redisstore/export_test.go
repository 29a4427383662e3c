package redisstore

import "github.com/floodgate/floodgate/internal/keys"

// HashTag and Slot expose the key layout to the external tests.
var (
	HashTag = keys.HashTag
	Slot    = keys.Slot
)
