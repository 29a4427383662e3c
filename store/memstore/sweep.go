package memstore

import (
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// Expiry: the background sweeper, Sweep, the sweep on each insert and
// eviction from a full shard.

// Samples taken from a shard: on every insert to sweep a little, and when a
// full shard must make room.
const (
	insertSweepSample = 2
	evictSample       = 8
)

// Sweep removes every entry expired at now and returns how many it
// removed. It locks one shard at a time.
func (s *Store) Sweep(now time.Time) int {
	nowMs := now.UnixMilli()
	removed := 0
	s.eachShard(func(sh *shard) { removed += sh.sweep(nowMs, -1) })
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
	sh.sample(evictSample, func(alg algorithms.Algorithm, key string, exp int64) {
		if !found || exp < victimExp {
			victimKey, victimAlg, victimExp, found = key, alg, exp, true
		}
	})
	if found {
		sh.remove(victimAlg, victimKey)
	}
}

// sample calls f with the algorithm, key and expiry of the first limit
// entries of each table, or of all entries when limit is negative. Map
// iteration starts at a random place, so a limit takes a random sample. f
// may remove the entry it is given.
func (sh *shard) sample(limit int, f func(alg algorithms.Algorithm, key string, exp int64)) {
	for i, t := range sh.counters {
		seen := 0
		for k, e := range t {
			if limit >= 0 && seen >= limit {
				break
			}
			seen++
			f(counterAlgorithms[i], k, e.exp)
		}
	}
	seen := 0
	for k, e := range sh.logs {
		if limit >= 0 && seen >= limit {
			break
		}
		seen++
		f(algorithms.SlidingWindowLog, k, e.exp)
	}
	seen = 0
	for k, e := range sh.settles {
		if limit >= 0 && seen >= limit {
			break
		}
		seen++
		f(recordAlg, k, e.exp)
	}
}
