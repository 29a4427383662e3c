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
// algorithms (32 bytes), the log plus the expiry for the sliding window log.
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
// Decide has passed. Sweep removes them on demand.
//
// # The key cap
//
// Config.MaxKeys bounds the number of entries (a key used under two
// algorithms counts twice); the store never holds more. It is divided
// exactly among the shards (each gets MaxKeys/Shards, the first
// MaxKeys%Shards one more), so a shard may refuse to grow while others
// have room: the cap is a bound, not a target. When an insert finds its
// shard full, the store samples a few entries of the shard, drops those that
// have expired, and if none had, evicts the sampled entry with the nearest
// expiry. That entry's limit is the one closest to being full again, so
// forgetting it early admits the fewest requests the limit would have
// denied. Eviction is still a loss of state: size MaxKeys so it stays rare.
//
// # Memory
//
// About 80-90 bytes per token bucket, sliding window or fixed window key of
// up to 16 bytes, map overhead included (TestBytesPerKey measures it over
// 100,000 keys and fails above 150). A sliding window log key holds a ring
// of one 8-byte slot per admitted unit still needed, at most Requests
// slots (algorithms.MaxLogRequests, 10,000): at most 80 KB and change.
// Deciding on it reads O(log Requests) slots and writes the ones it
// changes, in place (algorithms.ApplyMs); nothing copies the log.
//
// Config.MaxBytes caps the store's total memory, by its own accounting of
// each entry (EntryBytes: a fixed overhead, the key and the ring): when a
// write takes a shard past its share, the shard evicts the same way as
// for the key cap until it is under again. Both caps hold at once.
package memstore

import (
	"context"
	"fmt"
	"github.com/floodgate/floodgate/internal/keys"
	"hash/maphash"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/internal/algorithms"
	"github.com/floodgate/floodgate/internal/store"
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
	// sliding window logs.
	DefaultMaxBytes = 256 << 20
	// MinMaxBytes is the smallest memory cap; a smaller Config.MaxBytes is
	// raised to it. It holds a dozen full sliding window logs.
	MinMaxBytes = 1 << 20
	// minShardBytes is the smallest share of MaxBytes a shard gets: six
	// full sliding window logs. Shards are fewer when MaxBytes is small.
	minShardBytes = 512 << 10
	// MaxShards bounds Config.Shards.
	MaxShards = 1 << 16
)

// Config tunes a Store. The zero value is ready to use.
type Config struct {
	// MaxKeys caps the number of stored entries (one per key and
	// algorithm); the server's --memory-max-keys. 0 or negative means
	// DefaultMaxKeys (1,000,000).
	MaxKeys int
	// Shards is the number of independently locked shards, rounded up to a
	// power of two and capped at MaxShards. 0 or negative means
	// DefaultShards (256). It is lowered to the largest power of two not
	// above MaxKeys, so that every shard holds at least one key.
	Shards int
	// MaxBytes caps the memory of the stored entries, as EntryBytes
	// accounts it; the server's --memory-max-bytes. 0 or negative means
	// DefaultMaxBytes (256 MiB); below MinMaxBytes means MinMaxBytes. It
	// is divided among the shards like MaxKeys, and Shards is lowered so
	// that each gets at least 512 KiB.
	MaxBytes int64
	// SweepInterval is how often a background goroutine removes expired
	// entries. 0 means DefaultSweepInterval (10s); negative runs no
	// sweeper (expired entries are then removed only when touched, by the
	// sweep on each insert, by eviction and by Sweep).
	SweepInterval time.Duration
}

// Store is the in-memory store.Store. Create it with New; it is safe for
// concurrent use. Close stops its background sweeper.
type Store struct {
	shards []shard
	mask   uint64
	seed   maphash.Seed

	closed    atomic.Bool
	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
}

var _ store.Store = (*Store)(nil)

// Samples taken from a shard: on every insert to sweep a little, and when a
// full shard must make room.
const (
	insertSweepSample = 2
	evictSample       = 8
)

// shard holds the entries of the keys that hash to it.
type shard struct {
	mu sync.Mutex
	// counters holds token bucket, sliding window and fixed window state,
	// indexed by tableIndex; logs holds sliding window logs.
	counters [3]map[string]*counter
	logs     map[string]*logEntry
	n        int      // entries in all tables
	max      int      // cap on n
	bytes    int64    // EntryBytes of all entries
	maxBytes int64    // cap on bytes
	latest   int64    // newest now seen, Unix ms; written under mu
	_        [64]byte // keep neighbouring shards off one cache line
}

// counter is the state of a token bucket, sliding window or fixed window
// key (algorithms.State's A, B, C) and its expiry in Unix ms.
type counter struct {
	a, b, c, exp int64
}

// logEntry is the state of a sliding window log key (algorithms.State's
// A, B, C and Log: head, floor, low mark, ring) and its expiry in Unix ms.
type logEntry struct {
	exp, head, floor, low int64
	ring                  []int64
}

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
		shards: make([]shard, n),
		mask:   uint64(n - 1),
		seed:   maphash.MakeSeed(),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
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

var errClosed = fmt.Errorf("memstore: %w: store is closed", store.ErrUnavailable)

// Decide decides reqs together; see store.Store. It returns an error
// wrapping the context's error when ctx is already done, one wrapping
// store.ErrInvalid for a mismatched out or an invalid limit, and one
// wrapping store.ErrUnavailable after Close.
func (s *Store) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: decide: %w", err)
	}
	if len(out) != len(reqs) {
		return fmt.Errorf("memstore: decide: %w: %d requests but %d decisions", store.ErrInvalid, len(reqs), len(out))
	}
	if s.closed.Load() {
		return errClosed
	}
	for i := range reqs {
		if err := reqs[i].Limit.Validate(); err != nil {
			return fmt.Errorf("memstore: decide: request %d: %w: %w", i, store.ErrInvalid, err)
		}
	}
	nowMs := now.UnixMilli()
	switch len(reqs) {
	case 0:
		return nil
	case 1:
		s.decideOne(nowMs, &reqs[0], &out[0])
		return nil
	}
	s.decideMany(nowMs, reqs, out)
	return nil
}

// decideOne is Decide for a single request, without the bookkeeping a
// batch needs.
func (s *Store) decideOne(nowMs int64, r *store.Request, out *algorithms.Decision) {
	sh := &s.shards[s.shardIndex(r.Key)]
	alg := r.Limit.Algorithm
	sh.mu.Lock()
	sh.observe(nowMs)
	ek := keys.Entry(r.Key, r.Scope)
	ref := sh.find(alg, ek, nowMs)
	st := ref.state()
	if r.DryRun {
		*out = algorithms.EvaluateMs(r.Limit, st, nowMs, r.Cost)
	} else {
		// A sliding window log's ring is updated in place: only this
		// entry holds it, and the shard is locked.
		*out = algorithms.ApplyMs(r.Limit, &st, nowMs, r.Cost, nil)
		if out.Allowed && r.Cost != 0 {
			sh.write(alg, ek, ref, st, nowMs, out.TTL)
			sh.trim(nowMs)
		}
	}
	sh.mu.Unlock()
}

// pending is one (algorithm, key) of a batch: where its entry is and its
// tentative state.
type pending struct {
	sh    *shard
	alg   algorithms.Algorithm
	key   string
	ref   ref
	st    algorithms.State
	ttl   time.Duration
	dirty bool
}

// smallBatch is the batch size handled without heap allocations.
const smallBatch = 8

// decideMany is Decide for two or more requests: lock every shard
// involved in ascending order, decide on tentative states, commit only if
// nothing with a positive cost was denied.
func (s *Store) decideMany(nowMs int64, reqs []store.Request, out []algorithms.Decision) {
	var idxBuf [smallBatch]uint32
	idx := idxBuf[:0]
	for i := range reqs {
		idx = append(idx, uint32(s.shardIndex(reqs[i].Key)))
	}
	var lockBuf [smallBatch]uint32
	locks := sortedUnique(append(lockBuf[:0], idx...))
	for _, i := range locks {
		s.shards[i].mu.Lock()
		s.shards[i].observe(nowMs)
	}
	defer func() {
		for j := len(locks) - 1; j >= 0; j-- {
			s.shards[locks[j]].mu.Unlock()
		}
	}()

	var pendBuf [smallBatch]pending
	pend := pendBuf[:0]
	var index map[pendingKey]int // for large batches only
	if len(reqs) > 2*smallBatch {
		index = make(map[pendingKey]int, len(reqs))
	}
	denied := false
	// Logs are charged in place; undo takes the charges back if the
	// batch is denied.
	var undo algorithms.Undo
	for i := range reqs {
		r := &reqs[i]
		alg := r.Limit.Algorithm
		ek := keys.Entry(r.Key, r.Scope)
		p := -1
		if index != nil {
			if j, ok := index[pendingKey{alg, ek}]; ok {
				p = j
			}
		} else {
			for j := range pend {
				if pend[j].alg == alg && pend[j].key == ek {
					p = j
					break
				}
			}
		}
		if p < 0 {
			sh := &s.shards[idx[i]]
			ref := sh.find(alg, ek, nowMs)
			pend = append(pend, pending{sh: sh, alg: alg, key: ek, ref: ref, st: ref.state()})
			p = len(pend) - 1
			if index != nil {
				index[pendingKey{alg, ek}] = p
			}
		}
		pe := &pend[p]
		var d algorithms.Decision
		if r.DryRun {
			d = algorithms.EvaluateMs(r.Limit, pe.st, nowMs, r.Cost)
		} else {
			d = algorithms.ApplyMs(r.Limit, &pe.st, nowMs, r.Cost, &undo)
		}
		out[i] = d
		if r.Cost > 0 && !d.Allowed {
			denied = true
		}
		if d.Allowed && r.Cost != 0 && !r.DryRun {
			pe.ttl, pe.dirty = d.TTL, true
		}
	}
	if denied {
		undo.Revert()
		return
	}
	// Update entries that exist before inserting new ones: an insert may
	// evict, and must not evict an entry another pending still points to
	// before that pending is written.
	for pass := 0; pass < 2; pass++ {
		for j := range pend {
			pe := &pend[j]
			if pe.dirty && pe.ref.exists() == (pass == 0) {
				pe.sh.write(pe.alg, pe.key, pe.ref, pe.st, nowMs, pe.ttl)
			}
		}
	}
	// Only now may the memory cap evict: no pending points at an entry
	// any more.
	for _, i := range locks {
		s.shards[i].trim(nowMs)
	}
}

type pendingKey struct {
	alg algorithms.Algorithm
	key string
}

// sortedUnique sorts xs ascending and drops repeats, in place.
func sortedUnique(xs []uint32) []uint32 {
	for i := 1; i < len(xs); i++ { // insertion sort: batches are small
		for j := i; j > 0 && xs[j] < xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != out[len(out)-1] {
			out = append(out, x)
		}
	}
	return out
}

// Reset forgets key under alg, or under every algorithm when alg is
// algorithms.Unspecified, in the given scopes, or in every scope of key
// when none is given (a key's scopes share its shard, which Reset then
// walks).
func (s *Store) Reset(ctx context.Context, alg algorithms.Algorithm, key string, scopes ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: reset: %w", err)
	}
	if alg != algorithms.Unspecified && !alg.Valid() {
		return fmt.Errorf("memstore: reset: %w: unknown algorithm %v", store.ErrInvalid, alg)
	}
	if s.closed.Load() {
		return errClosed
	}
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	all := len(scopes) == 0
	if all {
		scopes = []string{""}
	}
	for _, a := range algorithms.Algorithms {
		if alg != algorithms.Unspecified && alg != a {
			continue
		}
		for _, sc := range scopes {
			sh.remove(a, keys.Entry(key, sc))
		}
		if all {
			for _, ek := range sh.keys(a) {
				if k, ok := keys.EntryKeyOf(ek); ok && k == key {
					sh.remove(a, ek)
				}
			}
		}
	}
	return nil
}

// keys lists the entry keys stored under alg.
func (sh *shard) keys(alg algorithms.Algorithm) []string {
	var out []string
	if alg == algorithms.SlidingWindowLog {
		for k := range sh.logs {
			out = append(out, k)
		}
		return out
	}
	for k := range sh.counters[tableIndex(alg)] {
		out = append(out, k)
	}
	return out
}

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

// Len is the number of stored entries (a key under two algorithms counts
// twice), including expired entries not yet removed.
func (s *Store) Len() int {
	total := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		total += sh.n
		sh.mu.Unlock()
	}
	return total
}

// Sweep removes every entry expired at now and returns how many it
// removed. It locks one shard at a time.
func (s *Store) Sweep(now time.Time) int {
	nowMs := now.UnixMilli()
	removed := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		removed += sh.sweep(nowMs, -1)
		sh.mu.Unlock()
	}
	return removed
}

// sweeper runs Sweep every interval at the newest now seen, until Close.
func (s *Store) sweeper(interval time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.Sweep(time.UnixMilli(s.latest()))
		}
	}
}

// latest is the newest now any Decide has passed, in Unix ms.
func (s *Store) latest() int64 {
	var newest int64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		newest = max(newest, sh.latest)
		sh.mu.Unlock()
	}
	return newest
}

func (s *Store) shardIndex(key string) uint64 {
	return maphash.String(s.seed, key) & s.mask
}

// ref points at a key's entry in a shard, if it has one.
type ref struct {
	c *counter
	l *logEntry
}

func (r ref) exists() bool { return r.c != nil || r.l != nil }

// state is the entry's algorithms.State; the zero State when absent.
func (r ref) state() algorithms.State {
	switch {
	case r.c != nil:
		return algorithms.State{A: r.c.a, B: r.c.b, C: r.c.c}
	case r.l != nil:
		return algorithms.State{A: r.l.head, B: r.l.floor, C: r.l.low, Log: r.l.ring}
	}
	return algorithms.State{}
}

// tableIndex maps a counting algorithm to its index in shard.counters.
func tableIndex(alg algorithms.Algorithm) int {
	switch alg {
	case algorithms.TokenBucket:
		return 0
	case algorithms.SlidingWindow:
		return 1
	}
	return 2 // algorithms.FixedWindow
}

// observe records nowMs as seen, for the background sweeper's clock.
func (sh *shard) observe(nowMs int64) {
	if nowMs > sh.latest {
		sh.latest = nowMs
	}
}

// find returns alg's entry for key, deleting it and returning an empty ref
// if it expired at nowMs.
func (sh *shard) find(alg algorithms.Algorithm, key string, nowMs int64) ref {
	if alg == algorithms.SlidingWindowLog {
		e, ok := sh.logs[key]
		if !ok {
			return ref{}
		}
		if e.exp <= nowMs {
			sh.dropLog(key, e)
			return ref{}
		}
		return ref{l: e}
	}
	t := sh.counters[tableIndex(alg)]
	e, ok := t[key]
	if !ok {
		return ref{}
	}
	if e.exp <= nowMs {
		sh.dropCounter(t, key)
		return ref{}
	}
	return ref{c: e}
}

// write stores st for key (found earlier as r) with a TTL from nowMs; a
// TTL of 0 deletes the entry.
func (sh *shard) write(alg algorithms.Algorithm, key string, r ref, st algorithms.State, nowMs int64, ttl time.Duration) {
	if ttl <= 0 {
		if r.exists() {
			sh.remove(alg, key)
		}
		return
	}
	exp := nowMs + ttl.Milliseconds()
	switch {
	case r.c != nil:
		r.c.a, r.c.b, r.c.c, r.c.exp = st.A, st.B, st.C, exp
		return
	case r.l != nil:
		sh.bytes += EntryBytes(alg, key, cap(st.Log)) - EntryBytes(alg, key, cap(r.l.ring))
		r.l.head, r.l.floor, r.l.low, r.l.ring, r.l.exp = st.A, st.B, st.C, st.Log, exp
		return
	}
	sh.sweep(nowMs, insertSweepSample)
	if sh.n >= sh.max {
		sh.evict(nowMs)
	}
	key = strings.Clone(key) // never keep the caller's backing array alive
	if alg == algorithms.SlidingWindowLog {
		if sh.logs == nil {
			sh.logs = make(map[string]*logEntry)
		}
		sh.logs[key] = &logEntry{exp: exp, head: st.A, floor: st.B, low: st.C, ring: st.Log}
	} else {
		i := tableIndex(alg)
		if sh.counters[i] == nil {
			sh.counters[i] = make(map[string]*counter)
		}
		sh.counters[i][key] = &counter{a: st.A, b: st.B, c: st.C, exp: exp}
	}
	sh.n++
	sh.bytes += EntryBytes(alg, key, cap(st.Log))
}

// remove deletes alg's entry for key, if any.
func (sh *shard) remove(alg algorithms.Algorithm, key string) {
	if alg == algorithms.SlidingWindowLog {
		if e, ok := sh.logs[key]; ok {
			sh.dropLog(key, e)
		}
		return
	}
	t := sh.counters[tableIndex(alg)]
	if _, ok := t[key]; ok {
		sh.dropCounter(t, key)
	}
}

// sweep deletes entries expired at nowMs among the first limit entries of
// each table (a random sample, as map iteration starts at a random place),
// or among all entries when limit is negative. It returns how many it
// deleted.
func (sh *shard) sweep(nowMs int64, limit int) int {
	removed := 0
	for _, t := range sh.counters {
		seen := 0
		for k, e := range t {
			if limit >= 0 && seen >= limit {
				break
			}
			seen++
			if e.exp <= nowMs {
				sh.dropCounter(t, k)
				removed++
			}
		}
	}
	seen := 0
	for k, e := range sh.logs {
		if limit >= 0 && seen >= limit {
			break
		}
		seen++
		if e.exp <= nowMs {
			sh.dropLog(k, e)
			removed++
		}
	}
	return removed
}

// evict makes room for one entry in a full shard: it samples entries,
// drops the expired ones, and if there were none, evicts the sampled entry
// with the nearest expiry.
func (sh *shard) evict(nowMs int64) {
	if sh.sweep(nowMs, evictSample) > 0 && sh.n < sh.max {
		return
	}
	var (
		victimKey string
		victimAlg algorithms.Algorithm
		victimExp int64
		found     bool
	)
	consider := func(alg algorithms.Algorithm, key string, exp int64) {
		if !found || exp < victimExp {
			victimKey, victimAlg, victimExp, found = key, alg, exp, true
		}
	}
	for i, t := range sh.counters {
		seen := 0
		for k, e := range t {
			if seen >= evictSample {
				break
			}
			seen++
			consider(counterAlgorithms[i], k, e.exp)
		}
	}
	seen := 0
	for k, e := range sh.logs {
		if seen >= evictSample {
			break
		}
		seen++
		consider(algorithms.SlidingWindowLog, k, e.exp)
	}
	if found {
		sh.remove(victimAlg, victimKey)
	}
}

// counterAlgorithms is the algorithm of each shard.counters table.
var counterAlgorithms = [3]algorithms.Algorithm{algorithms.TokenBucket, algorithms.SlidingWindow, algorithms.FixedWindow}
