package memstore

import (
	"math"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// Expiry: the background sweeper, sweep, the sweep on each insert and
// room in a full shard (states refused, records evicted).

// Samples taken from a shard: on every insert to sweep a little, and when a
// full shard must make room.
const (
	insertSweepSample = 2
	evictSample       = 8
)

// sweep removes every entry expired at now and returns how many it
// removed. It locks one shard at a time.
func (s *Store) sweep(now time.Time) int {
	nowMs := now.UnixMilli()
	removed := 0
	s.eachShard(func(sh *shard) { removed += sh.sweep(nowMs, -1) })
	return removed
}

// sweeper runs sweep every interval at the newest now seen, until Close.
func (s *Store) sweeper(interval time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.sweep(time.UnixMilli(s.latest()))
		}
	}
}

// latest is the newest now any Decide has passed, in Unix ms.
func (s *Store) latest() int64 {
	var newest int64
	s.eachShard(func(sh *shard) { newest = max(newest, sh.latest) })
	return newest
}

// sweep deletes entries expired at nowMs among the first limit entries of
// each table (a random sample, as map iteration starts at a random place),
// or among all entries when limit is negative. It returns how many it
// deleted.
func (sh *shard) sweep(nowMs int64, limit int) int {
	removed := 0
	sh.sample(limit, func(alg algorithms.Algorithm, key string, exp int64) {
		if exp <= nowMs {
			sh.remove(alg, key)
			removed++
		}
	})
	return removed
}

// Room for new entries: states are never evicted (the store does not know
// which still deny), so a write that does not fit in its shard once the
// expired entries are gone is refused; settlement records, counted apart,
// make room only by evicting other records.

// Why a shard has no room.
const (
	roomOK = iota
	fullKeys
	fullBytes
)

// room reports whether the shard can take entries more states and bytes
// more state bytes, sweeping every expired entry first when it cannot.
func (sh *shard) room(nowMs int64, entries int, bytes int64) int {
	if entries <= 0 && bytes <= 0 {
		return roomOK
	}
	fits := func() int {
		switch {
		case sh.n+entries > sh.max:
			return fullKeys
		case sh.bytes+bytes > sh.maxBytes:
			return fullBytes
		}
		return roomOK
	}
	if fits() == roomOK || nowMs < sh.soonest {
		return fits()
	}
	// Sweep the whole shard, and remember when its next state expires:
	// until then a full shard refuses without sweeping again.
	sh.sweep(nowMs, -1)
	sh.soonest = math.MaxInt64
	sh.sample(-1, func(alg algorithms.Algorithm, _ string, exp int64) {
		if alg != recordAlg {
			sh.soonest = min(sh.soonest, exp)
		}
	})
	return fits()
}

// evictRecord makes room for one settlement record of b bytes: it drops
// expired records, then evicts the sampled records with the nearest
// expiry until the records are within the shard's caps. It never touches
// a state.
func (sh *shard) evictRecord(nowMs int64, b int64) {
	for len(sh.settles) > 0 && (sh.nRec >= sh.max || sh.recBytes+b > sh.maxBytes) {
		var (
			victim string
			exp    int64
			found  bool
			seen   int
		)
		for k, r := range sh.settles { // a random sample
			if seen >= evictSample {
				break
			}
			seen++
			if r.exp <= nowMs {
				sh.dropRecord(k)
				continue
			}
			if !found || r.exp < exp {
				victim, exp, found = k, r.exp, true
			}
		}
		if found && (sh.nRec >= sh.max || sh.recBytes+b > sh.maxBytes) {
			sh.dropRecord(victim)
		}
	}
}

// sample calls f with the algorithm, key and expiry of the first limit
// entries of each table, or of all entries when limit is negative. Map
// iteration starts at a random place, so a limit takes a random sample. f
// may remove the entry it is given.
func (sh *shard) sample(limit int, f func(alg algorithms.Algorithm, key string, exp int64)) {
	for i, t := range sh.counters {
		sampleTable(t, limit, func(k string, e *counter) { f(algorithms.Algorithm(i), k, e.exp) })
	}
	for i, t := range sh.logs {
		sampleTable(t, limit, func(k string, e *logEntry) { f(algorithms.Algorithm(i), k, e.exp) })
	}
	sampleTable(sh.settles, limit, func(k string, e *settleRecord) { f(recordAlg, k, e.exp) })
}

// sampleTable calls f on the first limit entries of t, or on all of them
// when limit is negative.
func sampleTable[E any](t map[string]E, limit int, f func(key string, e E)) {
	seen := 0
	for k, e := range t {
		if limit >= 0 && seen >= limit {
			return
		}
		seen++
		f(k, e)
	}
}
