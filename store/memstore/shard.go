package memstore

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// shard holds the entries of the keys that hash to it.
type shard struct {
	mu sync.Mutex
	// counters and logs hold the states, one table an algorithm, indexed
	// by its algorithms.Algorithm value: counters for the algorithms whose
	// state is three integers, logs for those with a log
	// (algorithms.Facts.Log).
	counters []map[string]*counter
	logs     []map[string]*logEntry
	settles  map[string]*settleRecord // settlement records (settle.go)
	n        int                      // states in counters and logs
	nRec     int                      // records in settles
	max      int                      // cap on n, and apart on nRec
	bytes    int64                    // entryBytes of all states
	recBytes int64                    // recordBytes of all records
	maxBytes int64                    // cap on bytes, and apart on recBytes
	latest   int64                    // newest now seen, Unix ms; written under mu
	soonest  int64                    // no state expires before it (room)
	_        [64]byte                 // keep neighbouring shards off one cache line
}

// counter is the state of a key whose algorithm keeps three integers
// (algorithms.State's A, B, C) and its expiry in Unix ms.
type counter struct {
	a, b, c, exp int64
}

// logEntry is the state of a key whose algorithm keeps a log
// (algorithms.State's A, B, C and Log: head, floor, low mark, ring) and
// its expiry in Unix ms.
type logEntry struct {
	exp, head, floor, low int64
	ring                  []int64
}

// shardIndex is the index in s.shards of the shard key hashes to.
func (s *Store) shardIndex(key string) uint64 {
	return maphash.String(s.seed, key) & s.mask
}

// ref points at a key's entry in a shard, if it has one.
type ref struct {
	c *counter
	l *logEntry
}

func (r ref) exists() bool { return r.c != nil || r.l != nil }

// expiry is the entry's expiry in Unix ms; the entry must exist.
func (r ref) expiry() int64 {
	if r.c != nil {
		return r.c.exp
	}
	return r.l.exp
}

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

// isLog reports whether alg's state is a log (algorithms.Facts.Log).
func isLog(alg algorithms.Algorithm) bool { return alg.Facts().Log }

// table is alg's table in tables; nil when it has none yet.
func table[T any](tables []map[string]T, alg algorithms.Algorithm) map[string]T {
	if uint(alg) < uint(len(tables)) {
		return tables[alg]
	}
	return nil
}

// grown is tables grown to hold index i.
func grown[T any](tables []map[string]T, i algorithms.Algorithm) []map[string]T {
	for int(i) >= len(tables) {
		tables = append(tables, nil)
	}
	if tables[i] == nil {
		tables[i] = make(map[string]T)
	}
	return tables
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
	r := sh.lookup(alg, key)
	if r.exists() && r.expiry() <= nowMs {
		sh.remove(alg, key)
		return ref{}
	}
	return r
}

// lookup returns alg's entry for key, expired or not.
func (sh *shard) lookup(alg algorithms.Algorithm, key string) ref {
	if isLog(alg) {
		return ref{l: table(sh.logs, alg)[key]}
	}
	return ref{c: table(sh.counters, alg)[key]}
}

// update is a state to store: st for (alg, key), whose entry was found
// earlier as ref, kept for ttl (0 deletes the entry).
type update struct {
	alg algorithms.Algorithm
	key string
	ref ref
	st  algorithms.State
	ttl time.Duration
}

// growth is the states and bytes writing u adds to its shard.
func (u *update) growth() (int, int64) {
	switch {
	case u.ttl <= 0 || u.ref.c != nil:
		return 0, 0
	case u.ref.l != nil:
		return 0, entryBytes(u.alg, u.key, cap(u.st.Log)) - entryBytes(u.alg, u.key, cap(u.ref.l.ring))
	}
	return 1, entryBytes(u.alg, u.key, cap(u.st.Log))
}

// write stores u with its TTL counted from nowMs. The caller has made
// room (shard.room).
func (sh *shard) write(u *update, nowMs int64) {
	alg, key, r, st, ttl := u.alg, u.key, u.ref, u.st, u.ttl
	if ttl <= 0 {
		if r.exists() {
			sh.remove(alg, key)
		}
		return
	}
	exp := nowMs + ttl.Milliseconds()
	sh.soonest = min(sh.soonest, exp)
	switch {
	case r.c != nil:
		r.c.a, r.c.b, r.c.c, r.c.exp = st.A, st.B, st.C, exp
		return
	case r.l != nil:
		sh.bytes += entryBytes(alg, key, cap(st.Log)) - entryBytes(alg, key, cap(r.l.ring))
		r.l.head, r.l.floor, r.l.low, r.l.ring, r.l.exp = st.A, st.B, st.C, st.Log, exp
		return
	}
	sh.sweep(nowMs, insertSweepSample)
	key = strings.Clone(key) // never keep the caller's backing array alive
	if isLog(alg) {
		sh.logs = grown(sh.logs, alg)
		sh.logs[alg][key] = &logEntry{exp: exp, head: st.A, floor: st.B, low: st.C, ring: st.Log}
	} else {
		sh.counters = grown(sh.counters, alg)
		sh.counters[alg][key] = &counter{a: st.A, b: st.B, c: st.C, exp: exp}
	}
	sh.n++
	sh.bytes += entryBytes(alg, key, cap(st.Log))
}

// remove deletes alg's entry for key, if any.
func (sh *shard) remove(alg algorithms.Algorithm, key string) {
	if alg == recordAlg {
		sh.dropRecord(key)
		return
	}
	switch r := sh.lookup(alg, key); {
	case r.c != nil:
		delete(sh.counters[alg], key)
		sh.bytes -= entryBytes(alg, key, 0)
	case r.l != nil:
		delete(sh.logs[alg], key)
		sh.bytes -= entryBytes(alg, key, cap(r.l.ring))
	default:
		return
	}
	sh.n--
}
