package memstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// A settlement record remembers an idempotency key (Settle) until exp:
// fp is the settlement's numbers (store.Settlement.Fingerprint). Records
// live in the shard of their key, beside its states, and are counted
// apart from them: a shard holds at most its share of MaxKeys records and
// of MaxBytes record bytes besides its states. A caller sending millions
// of distinct idempotency keys evicts other records (the nearest expiry
// first), never a state, rather than growing the memory. An evicted
// record lets a late retry charge again; a record is evicted only when
// the records are full.
type settleRecord struct {
	fp  string
	exp int64
}

// recordAlg marks a settlement record in shard.sample and shard.remove.
const recordAlg algorithms.Algorithm = -1

// recordOverhead is a record's bytes besides its key and fingerprint: the
// map entry, the struct and the strings' headers.
const recordOverhead = 96

func recordBytes(key, fp string) int64 { return recordOverhead + int64(len(key)+len(fp)) }

var _ store.Settler = (*Store)(nil)

// Settle implements store.Settler: the charge and the record are written
// under the key's shard lock, so concurrent retries of one settlement
// charge once.
func (s *Store) Settle(ctx context.Context, now time.Time, st store.Settlement) (store.SettleResult, error) {
	if err := ctx.Err(); err != nil {
		return store.SettleResult{}, fmt.Errorf("memstore: settle: %w", err)
	}
	if s.closed.Load() {
		return store.SettleResult{}, errClosed
	}
	if err := store.ValidateSettlement(st); err != nil {
		return store.SettleResult{}, fmt.Errorf("memstore: settle: %w", err)
	}
	nowMs := now.UnixMilli()
	alg := st.Limit.Algorithm
	ek := entryKey(st.Key, st.Scope)
	rk := settleEntryKey(byte(alg), ek, st.IdempotencyKey)
	fp := st.Fingerprint()

	sh := &s.shards[s.shardIndex(st.Key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.observe(nowMs)
	ref := sh.find(alg, ek, nowMs)
	state := ref.state()
	delta := st.Delta()
	dup := false
	if r, ok := sh.settles[rk]; ok && r.exp > nowMs {
		if r.fp != fp {
			return store.SettleResult{}, fmt.Errorf("memstore: settle: %w", store.ErrSettleConflict)
		}
		dup, delta = true, 0
	}
	next, d := algorithms.Settle(st.Limit, state, nowMs, delta)
	if delta != 0 {
		u := update{alg: alg, key: ek, ref: ref, st: next, ttl: d.TTL}
		entries, bytes := u.growth()
		if err := s.full(sh.room(nowMs, entries, bytes)); err != nil {
			return store.SettleResult{}, fmt.Errorf("memstore: settle: %w", err)
		}
		sh.write(&u, nowMs)
	}
	if !dup {
		sh.putRecord(rk, fp, nowMs+s.settle.Milliseconds(), nowMs)
	}
	return store.SettleResult{Decision: d, Duplicate: dup}, nil
}

// putRecord stores a settlement record (replacing an expired one).
func (sh *shard) putRecord(rk, fp string, exp, nowMs int64) {
	if _, ok := sh.settles[rk]; ok {
		sh.dropRecord(rk)
	}
	sh.evictRecord(nowMs, recordBytes(rk, fp))
	if sh.settles == nil {
		sh.settles = make(map[string]*settleRecord)
	}
	rk = strings.Clone(rk)
	sh.settles[rk] = &settleRecord{fp: fp, exp: exp}
	sh.nRec++
	sh.recBytes += recordBytes(rk, fp)
}

// dropRecord forgets a settlement record.
func (sh *shard) dropRecord(rk string) {
	r, ok := sh.settles[rk]
	if !ok {
		return
	}
	delete(sh.settles, rk)
	sh.nRec--
	sh.recBytes -= recordBytes(rk, r.fp)
}
