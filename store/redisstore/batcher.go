package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// batcher coalesces script calls from concurrent Decide calls. A few
// sender goroutines (Config.BatchPipelines) each take the first queued
// call, gather what else is queued (waiting up to Config.BatchMaxWait, by
// default not at all), send it all as one pipeline, and wait for the
// answer. While they wait, new calls queue up, so the busier the store,
// the larger each pipeline: batching costs a lone caller no latency and
// gives a loaded one fewer round trips. Calls of one slot in a pipeline
// also share one script call (see exec). The senders live as long as the
// Store, so their stacks stay grown.
type batcher struct {
	s  *Store
	in chan *call

	mu      sync.RWMutex // guards closed against submit
	closed  bool
	quit    chan struct{}
	senders sync.WaitGroup
}

func newBatcher(s *Store) *batcher {
	b := &batcher{s: s, in: make(chan *call, 4*s.cfg.BatchMaxSize), quit: make(chan struct{})}
	for range s.cfg.BatchPipelines {
		b.senders.Go(b.sender)
	}
	return b
}

// submit queues calls; their results arrive on their done channel.
func (b *batcher) submit(ctx context.Context, calls []*call) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return errClosed
	}
	for _, c := range calls {
		select {
		case b.in <- c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// sender sends pipelines until the batcher closes, then what is queued.
func (b *batcher) sender() {
	batch := make([]*call, 0, b.s.cfg.BatchMaxSize)
	for {
		select {
		case c := <-b.in:
			batch = append(batch[:0], c)
		case <-b.quit:
			for batch = b.gather(batch[:0]); len(batch) > 0; batch = b.gather(batch[:0]) {
				b.send(batch)
			}
			return
		}
		if b.s.cfg.BatchMaxWait > 0 {
			timeout := time.After(b.s.cfg.BatchMaxWait)
		collect:
			for len(batch) < b.s.cfg.BatchMaxSize {
				select {
				case c := <-b.in:
					batch = append(batch, c)
				case <-timeout:
					break collect
				}
			}
		}
		b.send(b.gather(batch))
	}
}

// gather adds the calls already queued to batch, up to
// Config.BatchMaxSize.
func (b *batcher) gather(batch []*call) []*call {
	for len(batch) < b.s.cfg.BatchMaxSize {
		select {
		case c := <-b.in:
			batch = append(batch, c)
		default:
			return batch
		}
	}
	return batch
}

func (b *batcher) send(batch []*call) {
	ctx, cancel := context.WithTimeout(context.Background(), b.s.cfg.Timeout)
	defer cancel()
	b.s.exec(ctx, batch)
}

// close stops accepting calls, sends the queued ones and waits for every
// pipeline to finish.
func (b *batcher) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.mu.Unlock()
	close(b.quit)
	b.senders.Wait()
}

// run executes calls, through the batcher when there is one, and returns
// the first error.
func (s *Store) run(ctx context.Context, calls []*call) error {
	if s.batch == nil {
		s.exec(ctx, calls)
	} else if err := s.batch.submit(ctx, calls); err != nil {
		return err
	}
	return wait(ctx, calls...)
}

// wait waits for the results of calls, or for ctx to end first (then a
// call may still be under way, and must not be reused), and returns the
// first call's error.
func wait(ctx context.Context, calls ...*call) error {
	for _, c := range calls {
		select {
		case <-c.done:
			if c.err != nil {
				return c.err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// exec sends calls to Redis and hands each to its done channel. Calls of
// one slot with the same header travel in one function call, each a
// group of its own (lua/decide.lua), so Redis runs one script for many
// decisions.
func (s *Store) exec(ctx context.Context, calls []*call) {
	if units := merge(calls); len(units) == 1 {
		units[0].split(s.fcall(ctx, s.lib.decide, units[0].keys, units[0].args...))
	} else {
		cmds := s.pipeline(ctx, s.lib.decide, len(units), func(i int) ([]string, []any) { return units[i].keys, units[i].args })
		for i, cmd := range cmds {
			reply, err := cmd.Result()
			units[i].split(reply, fcallErr(err))
		}
	}
	for _, c := range calls {
		c.done <- c
	}
}

// unit is one script call carrying one or more calls, each a group.
type unit struct {
	calls []*call
	keys  []string
	args  []any // the first call's buf (with the header), then the others' requests
}

// mergeKey groups calls that may share a script call: one slot, one
// wire header. Floodgate's clock (header.calMs) is not part of it: only
// each calendar request's boundaries depend on it, and they travel in
// the request, so calls made in different milliseconds still merge.
type mergeKey struct {
	slot          int
	nowMs, keepMs int64
	probe         bool
}

// merge packs calls into units: the calls of one mergeKey in one unit,
// each a group (an ARGV, a slice of its call's buf) of its own.
func merge(calls []*call) []*unit {
	units := make([]*unit, 0, 1)
	byKey := map[mergeKey]*unit{}
	for _, c := range calls {
		k := mergeKey{c.slot, c.h.nowMs, c.h.keepMs, c.h.probe}
		u := byKey[k]
		if u == nil {
			u = &unit{calls: []*call{c}, keys: c.keys, args: []any{c.buf}}
			byKey[k] = u
			units = append(units, u)
			continue
		}
		if len(u.calls) == 1 { // copy before appending: c.keys belongs to the call
			u.keys = append(make([]string, 0, 4*len(u.keys)), u.keys...)
		}
		u.calls = append(u.calls, c)
		u.keys = append(u.keys, c.keys...)
		u.args = append(u.args, c.buf[hdrLen:])
	}
	return units
}

// split hands each call of u its part of the unit's reply.
func (u *unit) split(reply any, err error) {
	if err == nil && reply == late {
		err = errLate
	}
	if len(u.calls) == 1 {
		u.calls[0].reply, u.calls[0].err = reply, err
		return
	}
	str, ok := reply.(string)
	if err == nil && (!ok || recordsLen(str, len(u.keys)) != len(str)) {
		err = fmt.Errorf("%w: %d bytes for %d requests", errReply, len(str), len(u.keys))
	}
	off := 0
	for _, c := range u.calls {
		if err != nil {
			c.err = err
			continue
		}
		n := recordsLen(str[off:], len(c.keys))
		c.reply = str[off : off+n]
		off += n
	}
}
