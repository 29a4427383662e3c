package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// Reset implements store.Store: it deletes key's state under alg, or
// under every algorithm, in the given scopes (one DEL: a key's states
// share a slot), and SCANs for the window keys of an algorithm that keeps
// them (windowKeyed). Without scopes it deletes the scope "" and SCANs
// for the key's other scopes (on every master of a cluster), one SCAN
// step per Timeout: the cost grows with the keyspace, which is fine for
// an operator's reset and why decisions never scan.
func (s *Store) Reset(ctx context.Context, alg algorithms.Algorithm, key string, scopes ...string) error {
	if alg != algorithms.Unspecified && !alg.Valid() {
		return fmt.Errorf("redisstore: reset: %w: algorithm %v", store.ErrInvalid, alg)
	}
	algs := algorithms.All()
	if alg != algorithms.Unspecified {
		algs = []algorithms.Algorithm{alg}
	}
	tag := hashTag(key)
	all := len(scopes) == 0
	if all {
		scopes = []string{""}
	}
	var names, patterns []string
	for _, a := range algs {
		for _, sc := range scopes {
			name := stateKey(s.cfg.Prefix, a, tag, sc)
			names = append(names, name)
			if windowKeyed(a) {
				patterns = append(patterns, windowsPattern(name))
			}
		}
	}
	if err := s.del(ctx, s.client, names); err != nil {
		return err
	}
	if all {
		patterns = append(patterns, scopesPattern(s.cfg.Prefix, alg, tag))
	}
	for _, pattern := range patterns {
		if err := onMasters(ctx, s.client, func(ctx context.Context, c redis.Cmdable) error { return s.scanDel(ctx, c, pattern) }); err != nil {
			return err
		}
	}
	return nil
}

// scanDel deletes every key of c matching pattern.
func (s *Store) scanDel(ctx context.Context, c redis.Cmdable, pattern string) error {
	var cursor uint64
	for {
		tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		keys, next, err := c.Scan(tctx, cursor, pattern, 1000).Result()
		cancel()
		if err != nil {
			return s.wrap(ctx, "reset", err)
		}
		if err := s.del(ctx, c, keys); err != nil {
			return err
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// del deletes keys, which share a slot, in one DEL.
func (s *Store) del(ctx context.Context, c redis.Cmdable, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := c.Del(tctx, keys...).Err(); err != nil {
		return s.wrap(ctx, "reset", err)
	}
	return nil
}
