// Package memstore is the embedded, in-process store.Store: floodgate's
// default, so `floodgate serve` decides with no Redis at all. It runs the
// same math as the Redis scripts (algorithms.Decide), exactly, under any
// concurrency.
//
// # Layout
//
// Keys are spread over a power-of-two number of shards (Config.Shards, 256
// by default) by a seeded hash of the key alone, so every algorithm's state
// for one key lives in one shard. A shard is a mutex and one map per
// algorithm, keyed by the request's key and holding a pointer to a small
// entry: the three state integers plus the expiry for the counting
// algorithms (32 bytes), the log plus the expiry for one whose state is a
// log (algorithms.Facts.Log).
// There is no global lock.
//
// A Decide call locks the shards its requests touch, in ascending shard
// order and each once, so batches over many keys are atomic and cannot
// deadlock each other. It decides the requests in order on tentative copies
// of their states (a key repeated in one call sees its earlier admitted
// charges) and writes them back only if no request with a positive cost was
// denied. A DryRun request is decided against the state left by the
// admitted requests before it; its own charge is neither written nor seen
// by the requests after it, and, as for any request, its deny with a
// positive cost makes the call charge nothing. State whose TTL is 0 (a key
// back to full) is deleted.
//
// # Time and expiry
//
// The store has no clock of its own: it follows the now of each Decide. An
// entry expires at that now plus the decision's TTL (in milliseconds); an
// expired entry is treated as absent (the algorithms guarantee it is then
// equivalent to no state) and deleted when a request touches it. Expired
// entries nobody touches are removed by a small sweep on every insert (a few
// entries of the shard are checked) and by a background sweeper every
// Config.SweepInterval, which judges expiry against the newest now any
// Decide has passed.
//
// # Caps
//
// Config.MaxKeys bounds the number of states (a key used under two
// algorithms counts twice) and Config.MaxBytes their memory, by the
// store's own accounting of each entry (entryBytes: a fixed overhead, the
// key and a log's ring). Both are divided exactly among the shards, so a
// shard may refuse to grow while others have room: a cap is a bound, not
// a target. A live state is never evicted: the store does not know an
// entry's limit, so it cannot tell which states still deny, and
// forgetting one would let its key through. A write that needs a new
// state, or a ring that grows, in a full shard first sweeps the shard's
// expired entries; if there is still no room the whole call is refused,
// before anything is written, with an error wrapping
// store.ErrUnavailable that names the cap ("memory store full:
// --memory-max-keys N"): the rule's failure mode answers for new keys,
// while the keys held keep deciding exactly. Settlement records have caps
// of the same sizes of their own (settle.go) and evict only each other.
//
// # Memory
//
// About 80-90 bytes per key of up to 16 bytes whose state is integers,
// map overhead included (TestBytesPerKey holds it below 150). A key whose
// state is a log holds a ring of one 8-byte slot per admitted unit still
// needed, at most Requests slots (algorithms.MaxLogRequests): at most 80
// KB and change. Deciding on it reads O(log Requests) slots and writes
// the ones it changes, in place (algorithms.Apply); nothing copies the
// log.
//
// The API follows floodgate's releases: v0, no compatibility promise yet.
package memstore

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/store"
)

// Defaults for the zero Config fields.
const (
	// DefaultMaxKeys is the key cap when Config.MaxKeys is 0.
	DefaultMaxKeys = 1_000_000
	// DefaultShards is the shard count when Config.Shards is 0.
	DefaultShards = 256
	// DefaultSweepInterval is the background sweep period when
	// Config.SweepInterval is 0.
	DefaultSweepInterval = 10 * time.Second
	// DefaultMaxBytes is the memory cap when Config.MaxBytes is 0: 256
	// MiB, more than DefaultMaxKeys counters take, so that it binds on
	// logs.
	DefaultMaxBytes = 256 << 20
	// MinMaxBytes is the smallest memory cap; a smaller Config.MaxBytes is
	// raised to it. It holds a dozen full logs.
	MinMaxBytes = 1 << 20
	// minShardBytes is the smallest share of MaxBytes a shard gets: six
	// full logs. Shards are fewer when MaxBytes is small.
	minShardBytes = 512 << 10
	// MaxShards bounds Config.Shards.
	MaxShards = 1 << 16
)

// Config tunes a Store. The zero value is ready to use.
type Config struct {
	// SettleWindow is how long a settlement's idempotency key is
	// remembered (Settle); 0 means store.DefaultSettleWindow. Its records
	// are capped apart from the states, at MaxKeys records and MaxBytes
	// bytes of their own; a full store evicts records (the nearest expiry
	// first) only to make room for other records.
	SettleWindow time.Duration
	// MaxKeys caps the number of stored states (one per key and
	// algorithm); the server's --memory-max-keys. 0 or negative means
	// DefaultMaxKeys (1,000,000). A live state is never evicted: once
	// expired states are swept, a call that needs a new state in a full
	// shard is refused with an error wrapping store.ErrUnavailable that
	// names the cap, and keys already held keep deciding.
	MaxKeys int
	// Shards is the number of independently locked shards, rounded up to a
	// power of two and capped at MaxShards. 0 or negative means
	// DefaultShards (256). It is lowered to the largest power of two not
	// above MaxKeys, so that every shard holds at least one key.
	Shards int
	// MaxBytes caps the memory of the stored states, as entryBytes
	// accounts it; the server's --memory-max-bytes. A write past it is
	// refused like a new state past MaxKeys, never made room for by
	// evicting a live state. 0 or negative means
	// DefaultMaxBytes (256 MiB); below MinMaxBytes means MinMaxBytes. It
	// is divided among the shards like MaxKeys, and Shards is lowered so
	// that each gets at least 512 KiB.
	MaxBytes int64
	// SweepInterval is how often a background goroutine removes expired
	// entries. 0 means DefaultSweepInterval (10s); negative runs no
	// sweeper (expired entries are then removed only when touched, by the
	// sweep on each insert, when a full shard needs room).
	SweepInterval time.Duration
}

// Store is the in-memory store.Store. Create it with New; it is safe for
// concurrent use. Close stops its background sweeper.
type Store struct {
	shards  []shard
	maxKeys int // Config.MaxKeys once defaulted
	mask    uint64
	seed    maphash.Seed
	settle  time.Duration // Config.SettleWindow

	closed    atomic.Bool
	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
}

var _ store.Store = (*Store)(nil)

// New returns a Store configured by cfg, with its background sweeper
// running unless cfg.SweepInterval is negative.
func New(cfg Config) *Store {
	maxKeys := cfg.MaxKeys
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	n := cfg.Shards
	if n <= 0 {
		n = DefaultShards
	}
	maxBytes := cfg.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	maxBytes = max(maxBytes, MinMaxBytes)
	n = min(n, MaxShards)
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	if n > maxKeys {
		n = 1 << (bits.Len(uint(maxKeys)) - 1) // round down to a power of two
	}
	for n > 1 && maxBytes/int64(n) < minShardBytes {
		n /= 2
	}
	s := &Store{
		shards:  make([]shard, n),
		maxKeys: maxKeys,
		mask:    uint64(n - 1),
		seed:    maphash.MakeSeed(),
		settle:  cmp.Or(cfg.SettleWindow, store.DefaultSettleWindow),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	for i := range s.shards {
		s.shards[i].max = maxKeys / n
		if i < maxKeys%n {
			s.shards[i].max++
		}
		s.shards[i].maxBytes = maxBytes / int64(n)
		if int64(i) < maxBytes%int64(n) {
			s.shards[i].maxBytes++
		}
	}
	interval := cfg.SweepInterval
	if interval == 0 {
		interval = DefaultSweepInterval
	}
	if interval > 0 {
		go s.sweeper(interval)
	} else {
		close(s.done)
	}
	return s
}

// full is the error for room's answer, nil for roomOK: the store
// refuses a write rather than forget a live state, and says which cap.
func (s *Store) full(why int) error {
	switch why {
	case fullKeys:
		return fmt.Errorf("%w: memory store full: --memory-max-keys %d", store.ErrUnavailable, s.maxKeys)
	case fullBytes:
		return fmt.Errorf("%w: memory store full: --memory-max-bytes %d", store.ErrUnavailable, s.MaxBytes())
	}
	return nil
}

var errClosed = fmt.Errorf("memstore: %w: store is closed", store.ErrUnavailable)

// Ping returns nil while the store is open: an in-process store can always
// decide. It returns the context's error if ctx is done.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: ping: %w", err)
	}
	if s.closed.Load() {
		return errClosed
	}
	return nil
}

// Close stops the background sweeper and makes later calls fail with an
// error wrapping store.ErrUnavailable. It is safe to call more than once
// and always returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
	})
	<-s.done
	return nil
}

// Len is the number of stored entries, states and settlement records (a
// key under two algorithms counts twice), including expired entries not
// yet removed.
func (s *Store) Len() int {
	total := 0
	s.eachShard(func(sh *shard) { total += sh.n + sh.nRec })
	return total
}

// eachShard calls f on every shard in turn, each under its lock.
func (s *Store) eachShard(f func(sh *shard)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		f(sh)
		sh.mu.Unlock()
	}
}
