package redisstore

import (
	"context"
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
	s       *Store
	maxSize int
	maxWait time.Duration
	in      chan *call

	mu      sync.RWMutex // guards closed against submit
	closed  bool
	quit    chan struct{}
	senders sync.WaitGroup
}

func newBatcher(s *Store, maxSize, pipelines int, maxWait time.Duration) *batcher {
	b := &batcher{
		s:       s,
		maxSize: maxSize,
		maxWait: maxWait,
		in:      make(chan *call, 4*maxSize),
		quit:    make(chan struct{}),
	}
	for range pipelines {
		b.senders.Add(1)
		go b.sender()
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
	defer b.senders.Done()
	var timer *time.Timer
	if b.maxWait > 0 {
		timer = time.NewTimer(time.Hour)
		timer.Stop()
	}
	batch := make([]*call, 0, b.maxSize)
	for {
		var first *call
		select {
		case first = <-b.in:
		case <-b.quit:
			b.drain(batch)
			return
		}
		batch = append(batch[:0], first)
		if timer != nil {
			timer.Reset(b.maxWait)
		collect:
			for len(batch) < b.maxSize {
				select {
				case c := <-b.in:
					batch = append(batch, c)
				case <-timer.C:
					break collect
				}
			}
			timer.Stop()
		}
		batch = b.gather(batch)
		b.send(batch)
	}
}

// gather adds the calls already queued to batch, up to maxSize.
func (b *batcher) gather(batch []*call) []*call {
	for len(batch) < b.maxSize {
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

// drain sends what is still queued after close.
func (b *batcher) drain(batch []*call) {
	for {
		batch = b.gather(batch[:0])
		if len(batch) == 0 {
			return
		}
		b.send(batch)
	}
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
