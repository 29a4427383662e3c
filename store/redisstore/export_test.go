package redisstore

// HashTag and Slot expose the key layout to the external tests.
var (
	HashTag = hashTag
	Slot    = slot
)

// TBPadMin exposes the least pad of a token bucket's TTL to the
// external tests.
const TBPadMin = tbPadMin
