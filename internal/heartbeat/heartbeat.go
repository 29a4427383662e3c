// Package heartbeat counts the live floodgate replicas sharing one Redis,
// for failure_mode: local: each replica announces itself every interval
// and reads how many announced themselves within the last few. The count
// last read stays when Redis stops answering.
//
// The announcements are one sorted set (one key, so one Cluster slot) of
// replica IDs scored by when they expire, in Redis' TIME milliseconds;
// each beat, in one MULTI, refreshes the replica's member, removes the
// expired ones and counts the rest.
package heartbeat

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults for Config's zero values.
const (
	DefaultInterval = 5 * time.Second
	// ttlIntervals is how many intervals an announcement lives: a replica
	// stays counted through two missed beats.
	ttlIntervals = 3
	// KeySuffix follows the prefix in the key of the sorted set.
	KeySuffix = "replicas"
)

// Config tunes a Heartbeat. The zero value is usable.
type Config struct {
	// Prefix heads the key (serve's --redis-prefix): <prefix>replicas.
	Prefix string
	// Interval is the time between two beats; an announcement lives three
	// intervals. 0 means DefaultInterval.
	Interval time.Duration
	// Timeout bounds one beat. 0 means Interval.
	Timeout time.Duration
	// ID names this replica in the set; "" means the host name, the
	// process ID and random bytes.
	ID string
	// Logger hears of beats that fail after one succeeded, and of their
	// return; nil means slog.Default().
	Logger *slog.Logger
}

// Heartbeat announces one replica and keeps the count of live replicas.
type Heartbeat struct {
	client redis.UniversalClient
	key    string
	cfg    Config       // defaults filled in
	count  atomic.Int64 // last count read; 0 before the first

	started atomic.Bool // Start was called

	ctx    context.Context // of the beats Start makes; ended by Close
	stop   context.CancelFunc
	done   chan struct{}
	closed atomic.Bool
}

// New returns a Heartbeat on client that has not beaten yet: call Beat,
// or Start to beat every interval.
func New(client redis.UniversalClient, cfg Config) *Heartbeat {
	cfg.Interval = cmp.Or(max(cfg.Interval, 0), DefaultInterval)
	cfg.Timeout = cmp.Or(max(cfg.Timeout, 0), cfg.Interval)
	cfg.ID = cmp.Or(cfg.ID, defaultID())
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	ctx, stop := context.WithCancel(context.Background())
	return &Heartbeat{
		client: client, key: cfg.Prefix + KeySuffix, cfg: cfg,
		ctx: ctx, stop: stop, done: make(chan struct{}),
	}
}

// defaultID is the host name, the process ID and 4 random bytes: unique
// among replicas, and readable by an operator looking at the set.
func defaultID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
}

// Replicas is the count of live replicas read by the last beat that
// succeeded (this one included), or 0 before any did.
func (h *Heartbeat) Replicas() int { return int(h.count.Load()) }

// Beat announces the replica once and reads the count of live replicas.
// On an error the count stays what it was.
func (h *Heartbeat) Beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	now, err := h.client.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("heartbeat: TIME: %w", err)
	}
	nowMs := now.UnixMilli()
	ttl := ttlIntervals * h.cfg.Interval
	var card *redis.IntCmd
	_, err = h.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, h.key, redis.Z{Score: float64(nowMs + ttl.Milliseconds()), Member: h.cfg.ID})
		p.ZRemRangeByScore(ctx, h.key, "-inf", strconv.FormatInt(nowMs, 10))
		card = p.ZCard(ctx, h.key)
		p.PExpire(ctx, h.key, ttl) // the set goes when every replica has
		return nil
	})
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	h.count.Store(card.Val())
	return nil
}

// Start beats now and then every interval until Close, on a goroutine of
// its own. A failing beat is logged once, and its return again.
func (h *Heartbeat) Start() {
	if h.started.Swap(true) {
		return
	}
	go func() {
		defer close(h.done)
		t := time.NewTicker(h.cfg.Interval)
		defer t.Stop()
		failed := false // the last beat failed
		for {
			err := h.Beat(h.ctx)
			if err != nil && !failed {
				h.cfg.Logger.Warn("replica heartbeat failed: failure_mode local keeps the last replica count", "replicas", h.Replicas(), "err", err)
			} else if err == nil && failed {
				h.cfg.Logger.Info("replica heartbeat back", "replicas", h.Replicas())
			}
			failed = err != nil
			select {
			case <-h.ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Close stops the beats and removes this replica from the set (best
// effort, within one timeout), so the others count it out at their next
// beat. It does not close the client.
func (h *Heartbeat) Close() error {
	if h.closed.Swap(true) {
		return nil
	}
	h.stop()
	if h.started.Load() {
		<-h.done // no beat re-announces the replica after it left
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Timeout)
	defer cancel()
	if err := h.client.ZRem(ctx, h.key, h.cfg.ID).Err(); err != nil {
		return fmt.Errorf("heartbeat: leave: %w", err)
	}
	return nil
}
