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
	if len(scopes) == 0 {
		// Every scope of key: the unscoped entry, and each scoped one.
		plain := entryKey(key, "")
		sh.sample(-1, func(a algorithms.Algorithm, ek string, _ int64) {
			if k, scoped := entryKeyOf(ek); a != recordAlg && (alg == algorithms.Unspecified || alg == a) && (ek == plain || scoped && k == key) {
				sh.remove(a, ek)
			}
		})
		return nil
	}
	for _, a := range algorithms.All() {
		if alg == algorithms.Unspecified || alg == a {
			for _, sc := range scopes {
				sh.remove(a, entryKey(key, sc))
			}
		}
	}
	return nil
}
