package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/store"
)

// Demand is a store.DemandStore on Redis, so that every floodgate replica
// sees the demand reported to all of them. Each budget is one hash,
//
//	<prefix>qd:{<key>}   "r:<reporter>" = "milliRPS:expiresAtMs",
//	                     "#n", "#sum", "#min", "#max" = running totals
//
// updated by one atomic script (lua/demand.lua, a function of the store's
// library) per report, and expiring with its last live report. A report
// costs O(1) but for one scan of the budget's reporters when the earliest
// report expires (about once per TTL). Expiry uses the caller's clock:
// replicas' clocks must agree to well under a report's TTL.
type Demand struct {
	s *Store // its client, prefix, timeout and library; it never batches
}

var _ store.DemandStore = (*Demand)(nil)

// NewDemand returns a Demand on client with the given key prefix (""
// means DefaultPrefix) and per-call timeout (0 means DefaultTimeout). The
// caller keeps ownership of client.
func NewDemand(client redis.UniversalClient, prefix string, timeout time.Duration) (*Demand, error) {
	s, err := New(client, Config{Prefix: prefix, Timeout: max(timeout, 0), BatchMaxSize: 1})
	if err != nil {
		return nil, err
	}
	return &Demand{s}, nil
}

// demandKey is the hash of one budget; key is its hash tag.
func (d *Demand) demandKey(key string) (string, error) {
	if strings.ContainsAny(key, "{}") {
		return "", fmt.Errorf("redisstore: demand key %q: %w: braces would move the hash tag", key, store.ErrInvalid)
	}
	return d.s.cfg.Prefix + "qd:{" + key + "}", nil
}

// ReportDemand implements store.DemandStore: one script call per report,
// pipelined.
func (d *Demand) ReportDemand(ctx context.Context, now time.Time, reports []store.DemandReport, out []store.DemandTotal) error {
	if err := store.ValidateDemand(reports, out); err != nil {
		return fmt.Errorf("redisstore: report demand: %w", err)
	}
	if len(reports) == 0 {
		return nil
	}
	keys := make([]string, len(reports))
	for i, r := range reports {
		k, err := d.demandKey(r.Key)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	ctx, cancel := context.WithTimeout(ctx, d.s.cfg.Timeout)
	defer cancel()
	nowMs := now.UnixMilli()
	cmds := d.s.pipeline(ctx, d.s.lib.demand, len(reports), func(i int) ([]string, []any) {
		r := reports[i]
		return keys[i : i+1], []any{r.Reporter, max(r.MilliRPS, 0), nowMs, max(r.TTL.Milliseconds(), 1)}
	})
	for i, c := range cmds {
		vals, err := c.Int64Slice()
		if err != nil {
			return fmt.Errorf("redisstore: report demand: %w: %w", store.ErrUnavailable, fcallErr(err))
		}
		if len(vals) != 2 {
			return fmt.Errorf("redisstore: report demand: unexpected reply %v", vals)
		}
		out[i] = store.DemandTotal{Reporters: vals[0], MilliRPS: vals[1]}
	}
	return nil
}

// ForgetDemand implements store.DemandStore.
func (d *Demand) ForgetDemand(ctx context.Context, key, reporter string) error {
	k, err := d.demandKey(key)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, d.s.cfg.Timeout)
	defer cancel()
	if _, err := d.s.fcall(ctx, d.s.lib.forget, []string{k}, reporter); err != nil {
		return fmt.Errorf("redisstore: forget demand: %w: %w", store.ErrUnavailable, err)
	}
	return nil
}
