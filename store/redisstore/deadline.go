package redisstore

// A decision's deadline, checked by Redis itself. A caller that waited
// Config.Timeout has answered by its failure mode; a call queued behind a
// stalled Redis still runs when Redis wakes, and had it charged, a
// degraded answer would be counted. So each decide call carries when its
// caller gives up, in Redis' clock, and a call Redis starts later writes
// nothing (lua/decide.lua answers LATE). A reply that arrives late after
// a call run in time still counts: that window is one network trip.
//
// Redis' clock is this host's plus an offset measured with TIME (at the
// round trip's midpoint; on a cluster, the master furthest ahead), in the
// background when unknown or older than clockRefresh; until known, calls
// carry no deadline. The deadline sent is the caller's less the round
// trip and 2 ms (the offset's error), so a call started after the caller
// gave up always finds it passed.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/store"
)

// clockRefresh is how old the measured offset may get before a decision
// has it measured again.
const clockRefresh = time.Minute

// late is lib.lua's LATE, the whole reply of a decide call Redis started
// after its deadline.
const late = "!"

// errLate is a decide call Redis started after its deadline: it decided
// and wrote nothing.
var errLate = fmt.Errorf("redisstore: Redis ran the decision after its caller's deadline and wrote nothing: %w", store.ErrUnavailable)

// redisClock is the measured offset of Redis' clock from this host's.
type redisClock struct {
	shiftMs atomic.Int64 // Redis' TIME minus this host's clock, less the guard: 2 + the measurement's round trip
	atMs    atomic.Int64 // when shiftMs was measured, Unix ms here; 0: never
	busy    atomic.Bool  // a measurement is under way
}

// deadlineMs is when ctx ends, in Unix ms by Redis' clock; 0 when ctx has
// no deadline or the offset is not yet known. It starts a measurement
// when the offset is unknown or old.
func (s *Store) deadlineMs(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	at := s.clock.atMs.Load()
	if at == 0 || time.Now().UnixMilli()-at > clockRefresh.Milliseconds() {
		s.measureClock()
	}
	if at == 0 {
		return 0
	}
	return dl.UnixMilli() + s.clock.shiftMs.Load()
}

// measureClock measures the offset in the background, unless a
// measurement is under way. A failed one leaves the offset as it was.
func (s *Store) measureClock() {
	if !s.clock.busy.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.clock.busy.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), max(s.cfg.Timeout, time.Second))
		defer cancel()
		if off, rtt, err := s.clockOffset(ctx); err == nil {
			s.clock.shiftMs.Store(off - 2 - rtt)
			s.clock.atMs.Store(time.Now().UnixMilli())
		}
	}()
}

// clockOffset is Redis' clock minus this host's, measured at the round
// trip's midpoint, and the round trip rounded up, in ms: on a cluster the
// largest offset of its masters' and the longest trip.
func (s *Store) clockOffset(ctx context.Context) (offset, rtt int64, err error) {
	var mu sync.Mutex
	seen := false
	err = onMasters(ctx, s.client, func(ctx context.Context, c redis.Cmdable) error {
		before := time.Now()
		t, err := c.Time(ctx).Result()
		if err != nil {
			return err
		}
		trip := time.Since(before)
		o := t.UnixMilli() - before.Add(trip/2).UnixMilli()
		mu.Lock()
		defer mu.Unlock()
		if !seen || o > offset {
			offset = o
		}
		rtt, seen = max(rtt, (trip+time.Millisecond-1).Milliseconds()), true
		return nil
	})
	if err == nil && !seen {
		err = errors.New("redisstore: no cluster master answered TIME")
	}
	return offset, rtt, err
}
