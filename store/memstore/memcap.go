package memstore

import (
	"math/bits"

	"github.com/floodgate/floodgate/algorithms"
)

// The memory cap: what each entry is accounted, and the bookkeeping of a
// shard's share of Config.MaxBytes (shard.room enforces it).

// Accounted sizes of an entry, besides its key: the map slot and the
// entry struct, with allocator rounding (TestEntryBytes checks them
// against the heap).
const (
	counterOverhead = 96
	logOverhead     = 128
)

// entryBytes is the memory the store accounts for key under alg with a
// ring of ringSlots slots (its capacity; 0 for an algorithm without a
// log): what Config.MaxBytes caps.
func entryBytes(alg algorithms.Algorithm, key string, ringSlots int) int64 {
	if isLog(alg) {
		return logOverhead + int64(len(key)) + allocBytes(8*int64(ringSlots))
	}
	return counterOverhead + int64(len(key))
}

// allocBytes bounds what the Go allocator takes for n bytes: whole 8 KiB
// pages above 32 KiB, and below it a size class at most an eighth of a
// power of two above n.
func allocBytes(n int64) int64 {
	if n > 32<<10 {
		return (n + 8<<10 - 1) &^ (8<<10 - 1)
	}
	step := max(16, int64(1)<<bits.Len64(uint64(n))>>3)
	return (n + step - 1) / step * step
}

// MaxBytes is the store's memory cap (Config.MaxBytes once defaulted and
// raised to MinMaxBytes).
func (s *Store) MaxBytes() int64 {
	var total int64
	for i := range s.shards {
		total += s.shards[i].maxBytes // set once by New
	}
	return total
}
