package main

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// subject is one row of the table: an algorithm decided through the
// store, or the reference script.
type subject struct {
	name   string
	prefix string // of its keys, so no two subjects share state
	limit  algorithms.Limit
	ref    string // the reference library's function, or refIncr; "" for the store
	// perCalls are the decisions a call it is measured at; nil: 8 and 1.
	perCalls []int
	// keys, when set, is its number of keys in place of -keys.
	keys int
	// cold leaves its keys unwarmed and gives each phase keys of its
	// own: every decision meets a key no decision wrote.
	cold bool
	// group, when above 1, makes each Decide one of that many requests
	// (an all-or-nothing group, as a request of several descriptors):
	// from a lone caller at perCall == group, else from perCall / group
	// callers whose Decide calls the batcher joins into one FCALL.
	group int
}

// refIncr is the subject of envoyproxy/ratelimit's pattern: per key an
// INCRBY and an EXPIRE, pipelined, perCall keys a pipeline (a request of
// perCall descriptors, or requests sharing a pipeline), no script.
const refIncr = "INCRBY+EXPIRE"

// day is the period of every subject: long enough that one decision's
// state outlives the whole run (the state stays live, as in a service).
const day = 24 * time.Hour

func subjects() []subject {
	lim := func(a algorithms.Algorithm, n int64) algorithms.Limit {
		return algorithms.Limit{Algorithm: a, Requests: n, Period: day}
	}
	return []subject{
		{name: "reference GCRA (gcra.lua)", prefix: "r", ref: "fgref_gcra"},
		{name: "reference pattern: INCRBY + EXPIRE a key, pipelined", prefix: "i", ref: refIncr, perCalls: []int{8, 3, 1}},
		{name: "token bucket", prefix: "t", limit: lim(algorithms.TokenBucket, 1000)},
		{name: "sliding window", prefix: "s", limit: lim(algorithms.SlidingWindow, 1000)},
		{name: "fixed window", prefix: "f", limit: lim(algorithms.FixedWindow, 1000)},
		{name: "leaky bucket", prefix: "l", limit: lim(algorithms.LeakyBucket, 1000)},
		{name: "calendar quota (fixed window, a UTC day)", prefix: "c", limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1000, Calendar: algorithms.Day}},
		{name: "sliding window log", prefix: "g", limit: lim(algorithms.SlidingWindowLog, 100)},
		// A state over within a ms, a key never written (cold): every
		// decision finds no key (a key seen once, a limit far above its
		// traffic).
		{name: "token bucket, each key new (1,000,000 a second)", prefix: "tn", limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1_000_000, Period: time.Second}, cold: true},
		{name: "`return 1` (the fixed cost of a call)", prefix: "n", ref: "fgref_noop"},
		// Last, so its keys leave the rows above the keyspace they had
		// without it (a dict that grows rehashes during the rows after).
		{name: "one Decide of 3 token-bucket limits", prefix: "t3", limit: lim(algorithms.TokenBucket, 1000), perCalls: []int{3}, group: 3},
		// The side-by-side's load of 3 descriptors: Decide calls of 3
		// requests from 8 callers; a token bucket's keys new, or each
		// seen again some 10 calls later (well within a second under
		// callgrind, as the side-by-side's 2 a second a key); a fixed
		// window's each window new.
		{name: "Decides of 3 token-bucket limits, each key new, 8 callers", prefix: "t3n", limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1_000_000, Period: time.Second}, perCalls: []int{24}, group: 3, cold: true},
		{name: "Decides of 3 token-bucket limits, each key again within a second, 8 callers", prefix: "t3a", limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1_000_000, Period: time.Second}, perCalls: []int{24}, group: 3, keys: 240},
		{name: "Decides of 3 fixed-window limits, each window new, 8 callers", prefix: "f3n", limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1_000_000, Period: time.Second}, perCalls: []int{24}, group: 3},
	}
}

// driver sends one subject's decisions: perCall of them a script call,
// through the store's own code (a lone caller; or perCall concurrent
// callers whose calls the batcher joins into one FCALL), or to the
// reference with perCall keys a call.
type driver struct {
	srv     *server
	sub     subject
	keys    int
	perCall int
	st      *redisstore.Store
	next    int // the next decision's number
}

func newDriver(srv *server, sub subject, keys, perCall int) (*driver, error) {
	d := &driver{srv: srv, sub: sub, keys: cmp.Or(sub.keys, keys), perCall: perCall}
	if sub.ref != "" {
		return d, nil
	}
	cfg := redisstore.Config{Timeout: time.Minute, BatchMaxSize: 1}
	if callers := perCall / max(sub.group, 1); callers > 1 {
		// The batcher sends once a call of each caller is queued: each
		// FCALL then holds that many groups, as under load.
		cfg = redisstore.Config{Timeout: time.Minute, BatchMaxSize: callers, BatchPipelines: 1, BatchMaxWait: time.Minute}
	}
	st, err := redisstore.New(d.srv.client, cfg)
	if err != nil {
		return nil, err
	}
	d.st = st
	return d, nil
}

func (d *driver) close() {
	if d.st != nil {
		_ = d.st.Close()
	}
}

// key is the n-th decision's key: the keys in a fixed order that visits
// every one before repeating (7919 is prime to any key count it is used
// with here) and keeps neighbours apart.
func (d *driver) key(n int) string {
	if d.sub.cold {
		return d.sub.prefix + strconv.Itoa(d.perCall) + ":" + strconv.Itoa(n*7919%d.keys)
	}
	return d.sub.prefix + strconv.Itoa(n*7919%d.keys)
}

// run makes n decisions (a multiple of perCall).
func (d *driver) run(ctx context.Context, n int) error {
	base := d.next
	d.next += n
	if d.sub.ref != "" {
		return d.runRef(ctx, base, n)
	}
	size := max(d.sub.group, 1) // requests a Decide
	callers := d.perCall / size
	if callers == 1 {
		reqs := make([]store.Request, d.perCall)
		out := make([]algorithms.Decision, d.perCall)
		for i := 0; i < n; i += d.perCall {
			for j := range reqs {
				reqs[j] = store.Request{Key: d.key(base + i + j), Limit: d.sub.limit, Cost: 1}
			}
			if err := d.st.Decide(ctx, time.Now(), reqs, out); err != nil {
				return fmt.Errorf("%s: %w", d.sub.name, err)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for g := range callers {
		wg.Go(func() {
			reqs := make([]store.Request, size)
			out := make([]algorithms.Decision, size)
			for i := g * size; i < n; i += d.perCall {
				for j := range reqs {
					reqs[j] = store.Request{Key: d.key(base + i + j), Limit: d.sub.limit, Cost: 1}
				}
				if err := d.st.Decide(ctx, time.Now(), reqs, out); err != nil {
					errs[g] = fmt.Errorf("%s: %w", d.sub.name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// runRef makes n decisions of the reference, perCall keys a call, one
// call at a time (as a lone caller, or the batcher's one pipeline).
func (d *driver) runRef(ctx context.Context, base, n int) error {
	if d.sub.ref == refIncr {
		return d.runIncr(ctx, base, n)
	}
	T := day.Milliseconds() / 1000
	args := []any{strconv.FormatInt(T, 10), strconv.FormatInt(T*999, 10), strconv.FormatInt(T*1000, 10)} // burst 1000: tau = 999 T
	keys := make([]string, d.perCall)
	for i := 0; i < n; i += d.perCall {
		for j := range keys {
			keys[j] = "ref:{" + d.key(base+i+j) + "}"
		}
		if err := d.srv.client.FCall(ctx, d.sub.ref, keys, args...).Err(); err != nil {
			return fmt.Errorf("%s: %w", d.sub.name, err)
		}
	}
	return nil
}

// runIncr makes n decisions of the INCRBY + EXPIRE pattern, perCall
// keys a pipeline, one pipeline at a time.
func (d *driver) runIncr(ctx context.Context, base, n int) error {
	ttl := day / time.Second
	for i := 0; i < n; i += d.perCall {
		pipe := d.srv.client.Pipeline()
		for j := range d.perCall {
			key := "incr:" + d.key(base+i+j)
			pipe.IncrBy(ctx, key, 1)
			pipe.Expire(ctx, key, ttl*time.Second)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("%s: %w", d.sub.name, err)
		}
	}
	return nil
}

// warm gives every key of the subject a state: one decision each, many
// callers at once, through a batching store (or pipelined FCALLs).
func warm(ctx context.Context, srv *server, sub subject, keys int) error {
	keys = cmp.Or(sub.keys, keys)
	if sub.ref != "" {
		d := &driver{srv: srv, sub: sub, keys: keys, perCall: 1}
		return d.runRef(ctx, 0, keys)
	}
	st, err := redisstore.New(srv.client, redisstore.Config{Timeout: time.Minute})
	if err != nil {
		return err
	}
	defer st.Close()
	const callers = 32
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for g := range callers {
		wg.Go(func() {
			out := make([]algorithms.Decision, 1)
			for i := g; i < keys; i += callers {
				req := []store.Request{{Key: sub.prefix + strconv.Itoa(i), Limit: sub.limit, Cost: 1}}
				if err := st.Decide(ctx, time.Now(), req, out); err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("warming %s: %w", sub.name, err)
		}
	}
	return nil
}
