package memstore

import (
	"context"
	"fmt"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

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
	for _, a := range algorithms.All() {
		if alg != algorithms.Unspecified && alg != a {
			continue
		}
		for _, sc := range scopes {
			sh.remove(a, entryKey(key, sc))
		}
		if all {
			for _, ek := range sh.keys(a) {
				if k, ok := entryKeyOf(ek); ok && k == key {
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
	if isLog(alg) {
		for k := range sh.logTable(alg) {
			out = append(out, k)
		}
		return out
	}
	for k := range sh.counterTable(alg) {
		out = append(out, k)
	}
	return out
}
