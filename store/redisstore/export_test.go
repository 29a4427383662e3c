package redisstore

// HashTag and Slot expose the key layout to the external tests.
var (
	HashTag = hashTag
	Slot    = slot
)
