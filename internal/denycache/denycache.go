// Package denycache answers denied keys from memory. A key denied with
// RetryAfter T cannot pass before T at the same or a larger cost: under
// every algorithm here, time is the only thing that makes room, and other
// requests only take more. So until T, a request for that key is answered
// locally, and an attack on a key costs the store nothing.
//
// Only single-unit checks (plain or NoWait, never a debt charge) are
// cached, and for them the cached answer is exactly the store's, to the
// millisecond: before T not even one unit fits, and a deny changes no
// state. A refund, a Reset, a debt charge or a charge that queues (a
// NoWait deny does not stop a request that may wait) through this cache
// drops the key's entries; through another replica, a cached deny may
// outlive such a change by at most T. Only calls where every request is a
// cached deny are answered locally.
package denycache

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// DefaultMaxEntries is Config.MaxEntries' default.
const DefaultMaxEntries = 100_000

const shardCount = 64

// Config tunes a Cache. The zero value is usable.
type Config struct {
	// MaxEntries bounds the cached denies; 0 means DefaultMaxEntries. When
	// full, expired entries go first, then arbitrary ones (a dropped entry
	// only costs one store call).
	MaxEntries int
	// OnHit, if set, is called once per request answered from the cache.
	OnHit func(n int)
}

// Cache is a store.Store that answers known denies from memory.
type Cache struct {
	next     store.Store
	onHit    func(int)
	perShard int
	seed     maphash.Seed
	shards   [shardCount]shard
}

type shard struct {
	mu sync.Mutex
	m  map[string][]entry // by store key
}

// entry is one cached deny.
type entry struct {
	scope string
	limit algorithms.Limit
	// mode is the requests' as cacheMode keys it: a deny answers only
	// requests of its own mode.
	mode  algorithms.Mode
	at    int64 // when the store denied, in Unix ms as the stores read now
	until int64 // at + RetryAfter, in Unix ms
	d     algorithms.Decision
}

var _ store.Store = (*Cache)(nil)

// New wraps next.
func New(next store.Store, cfg Config) *Cache {
	maxEntries := cmp.Or(max(cfg.MaxEntries, 0), DefaultMaxEntries)
	c := &Cache{next: next, onHit: cfg.OnHit, perShard: max(1, maxEntries/shardCount), seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]entry)
	}
	return c
}

func (c *Cache) shard(key string) *shard {
	return &c.shards[maphash.String(c.seed, key)%shardCount]
}

// Decide implements store.Store.
func (c *Cache) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	if len(reqs) > 0 && len(out) == len(reqs) && c.answer(now, reqs, out) {
		if c.onHit != nil {
			c.onHit(len(reqs))
		}
		return nil
	}
	if err := c.next.Decide(ctx, now, reqs, out); err != nil {
		return err
	}
	c.learn(now, reqs, out)
	return nil
}

// answer fills out from the cache if every request is a cached deny.
func (c *Cache) answer(now time.Time, reqs []store.Request, out []algorithms.Decision) bool {
	for i := range reqs {
		r := &reqs[i]
		m, cacheable := cacheMode(r.Limit, r.Mode)
		if r.Cost != 1 || !cacheable {
			return false
		}
		s := c.shard(r.Key)
		s.mu.Lock()
		es := s.m[r.Key]
		k := find(es, r.Scope, r.Limit, m)
		var e entry
		if k >= 0 {
			e = es[k]
		}
		s.mu.Unlock()
		nowMs := now.UnixMilli()
		if k < 0 || nowMs >= e.until {
			return false
		}
		passed := time.Duration(nowMs-e.at) * time.Millisecond
		d := e.d
		d.RetryAfter = time.Duration(e.until-nowMs) * time.Millisecond
		d.ResetAfter = max(d.ResetAfter-passed, d.RetryAfter)
		d.TTL = d.ResetAfter
		out[i] = d
	}
	return true
}

// learn caches the denies of a decided call and forgets keys refunded
// or charged as debt.
func (c *Cache) learn(now time.Time, reqs []store.Request, out []algorithms.Decision) {
	for i := range reqs {
		r := &reqs[i]
		switch {
		case r.Cost < 0 && !r.DryRun:
			c.forget(r.Key)
		case r.Cost > 0 && r.Mode&algorithms.Debt != 0 && !r.DryRun:
			// A debt charge passes a denied key and deepens the debt:
			// its cached denies would promise too short a wait.
			c.forget(r.Key)
		case r.Cost > 0 && out[i].Allowed && !r.DryRun && r.Limit.Algorithm.Facts().Waits:
			// A request that queues passes a key whose NoWait deny is
			// cached and makes the queue longer: that deny's wait is
			// now too short.
			c.forget(r.Key)
		case r.Cost == 1 && !out[i].Allowed && out[i].RetryAfter > 0 && alone(reqs, i):
			m, cacheable := cacheMode(r.Limit, r.Mode)
			if !cacheable {
				continue
			}
			at := now.UnixMilli()
			retryMs := (out[i].RetryAfter + time.Millisecond - 1).Milliseconds() // whole already; never rounded down
			c.put(r.Key, entry{scope: r.Scope, limit: r.Limit, mode: m, at: at, until: at + retryMs, d: out[i]})
		}
	}
}

// cacheMode is the mode under which a request's denies are cached and
// matched; cacheable is false for a debt charge (never refused) or an
// unknown mode. NoWait changes the decision of an algorithm that waits
// only, so for every other one the mode is dropped and a deny seen
// through either API answers both.
func cacheMode(l algorithms.Limit, m algorithms.Mode) (mode algorithms.Mode, cacheable bool) {
	switch {
	case m&^algorithms.NoWait != 0:
		return 0, false
	case !l.Algorithm.Facts().Waits:
		return 0, true
	}
	return m, true
}

// alone reports whether reqs[i]'s key appears only once in the call: a
// deny caused by the same call's own earlier charges (rolled back with the
// call) is not a deny of the key.
func alone(reqs []store.Request, i int) bool {
	for j := range reqs {
		if j != i && reqs[j].Key == reqs[i].Key && reqs[j].Scope == reqs[i].Scope && reqs[j].Limit.Algorithm == reqs[i].Limit.Algorithm {
			return false
		}
	}
	return true
}

// find is the index in es of the deny of scope, l and m, or -1.
func find(es []entry, scope string, l algorithms.Limit, m algorithms.Mode) int {
	return slices.IndexFunc(es, func(e entry) bool { return e.scope == scope && e.limit == l && e.mode == m })
}

func (c *Cache) put(key string, e entry) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	es := s.m[key]
	if i := find(es, e.scope, e.limit, e.mode); i >= 0 {
		es[i] = e
		return
	}
	if _, ok := s.m[key]; !ok && len(s.m) >= c.perShard {
		c.evict(s, e.at)
	}
	s.m[key] = append(es, e)
}

// evict makes room in s: expired entries first, else any one key.
func (c *Cache) evict(s *shard, nowMs int64) {
	dropped := false
	n := 0
	for k, es := range s.m {
		live := slices.DeleteFunc(es, func(e entry) bool { return nowMs >= e.until })
		if len(live) == 0 {
			delete(s.m, k)
			dropped = true
		} else {
			s.m[k] = live
		}
		if n++; n >= 16 {
			break
		}
	}
	if !dropped {
		for k := range s.m {
			delete(s.m, k)
			return
		}
	}
}

func (c *Cache) forget(key string) {
	s := c.shard(key)
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// Reset implements store.Store; it forgets the key's cached denies first.
func (c *Cache) Reset(ctx context.Context, alg algorithms.Algorithm, key string, scopes ...string) error {
	c.forget(key) // every scope's denies: forgetting more than needed only asks the store
	return c.next.Reset(ctx, alg, key, scopes...)
}

// Settle implements store.Settler when the wrapped store does; it forgets
// the key's cached denies first (a refund may shorten them).
func (c *Cache) Settle(ctx context.Context, now time.Time, s store.Settlement) (store.SettleResult, error) {
	st, ok := c.next.(store.Settler)
	if !ok {
		return store.SettleResult{}, fmt.Errorf("denycache: settle: %w: %T cannot settle", store.ErrInvalid, c.next)
	}
	c.forget(s.Key)
	return st.Settle(ctx, now, s)
}

// Ping implements store.Store.
func (c *Cache) Ping(ctx context.Context) error { return c.next.Ping(ctx) }

// Close implements store.Store.
func (c *Cache) Close() error { return c.next.Close() }
