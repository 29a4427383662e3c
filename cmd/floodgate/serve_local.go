package main

import (
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/internal/heartbeat"
	"github.com/floodgate/floodgate/internal/localshare"
	"github.com/floodgate/floodgate/store/memstore"
)

// localFlags are the settings of failure_mode local.
type localFlags struct {
	replicas  int           // --replicas: 0 counts the heartbeats
	heartbeat time.Duration // --replicas-heartbeat
}

func (f *localFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.replicas, "replicas", 0, "failure_mode local: the replica count whose share of each limit a replica enforces in memory while Redis is down (0: the live replicas counted by their heartbeats in Redis before the outage)")
	fs.DurationVar(&f.heartbeat, "replicas-heartbeat", heartbeat.DefaultInterval, "Redis: how often a replica announces itself in <prefix>replicas, for failure_mode local's replica count (a replica stays counted three intervals)")
}

// localFailure is failure_mode local's wiring: the replica's share of
// each limit (given to both APIs) and, on Redis, the heartbeat that
// counts the replicas.
type localFailure struct {
	share *localshare.Share
	fixed int // --replicas; 0: the heartbeat's count
	beat  atomic.Pointer[heartbeat.Heartbeat]
}

// newLocalFailure is the wiring of f. The local memory is bounded like
// the embedded store (--memory-max-keys, --memory-max-bytes).
func newLocalFailure(f serveFlags) *localFailure {
	l := &localFailure{fixed: f.local.replicas}
	l.share = localshare.New(l.replicas, memstore.Config{MaxKeys: f.memory.MaxKeys, MaxBytes: f.memory.MaxBytes})
	return l
}

// replicas is the count the shares divide by: --replicas, else the count
// the heartbeat last read (kept through an outage), else 1 (a replica
// that never reached Redis knows of no other).
func (l *localFailure) replicas() int {
	if l.fixed > 0 {
		return l.fixed
	}
	if hb := l.beat.Load(); hb != nil {
		return max(hb.Replicas(), 1)
	}
	return 1
}

// startHeartbeat announces the replica in Redis every --replicas-heartbeat
// (also with --replicas, so that replicas counting heartbeats count this
// one). The closer stops it and leaves the set.
func (l *localFailure) startHeartbeat(client redis.UniversalClient, f serveFlags, log *slog.Logger) io.Closer {
	hb := heartbeat.New(client, heartbeat.Config{
		Prefix:   f.redis.Prefix,
		Interval: f.local.heartbeat,
		Timeout:  max(f.redis.Timeout, min(f.local.heartbeat, time.Second)),
		Logger:   log,
	})
	l.beat.Store(hb)
	hb.Start()
	return hb
}

// onBreaker chains next (the breaker's reporter) with the share: when the
// circuit opens it logs the share the local limits enforce; the local
// counts are kept across its changes until they expire (StoreChanged).
func (l *localFailure) onBreaker(next func(open bool, cause error), log *slog.Logger) func(open bool, cause error) {
	return func(open bool, cause error) {
		if next != nil {
			next(open, cause)
		}
		if open {
			log.Info("limits with failure_mode local enforce their share in memory", "replicas", l.share.Replicas())
		}
		l.share.StoreChanged(open, cause)
	}
}
