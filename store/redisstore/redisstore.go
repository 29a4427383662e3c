// Package redisstore is the store.Store on Redis 7.0 or later (one Redis,
// Sentinel, or a Redis Cluster, through go-redis' UniversalClient). Every
// decision is made by an atomic Lua function (lua/, the twins of package
// algorithms, proven equal to it by a differential test), so many
// floodgate replicas can share one Redis. The functions read Redis' TIME,
// so replicas with skewed clocks agree (Config.ClientTime uses Decide's
// now instead).
//
// A request's state lives at <prefix><alg>:{<tag>}[:<scope>], e.g.
// fg:tat:{kuser:42}, where tag is the request's key escaped (keys.go): a
// user key can neither move its slot nor end the tag early, and distinct
// (key, scope) pairs never share a Redis key. Every key of one store key
// shares its slot.
//
// All requests of a Decide call whose keys share a slot (on a standalone
// Redis or Sentinel: all of them) go in one function call, which decides
// them all or nothing. In a Redis Cluster with several slots, Decide makes
// one call per slot, pipelined; when a slot's call denies, the others'
// charges are refunded by a second call. That is not atomic across slots:
// another client may see the charge before its refund, and a failed
// refund leaves it to decay; it never admits more than the limits allow.
// A refund, a debt and a waiting algorithm's charge cannot be taken back
// exactly, so a batch across slots holding one is first decided without
// writing (a probe) and written only when nothing is denied.
//
// Concurrent Decide calls are batched (batcher.go): their calls travel
// in one pipeline, those of one slot in one function call. Each call
// carries its caller's deadline in Redis' clock, and Redis decides
// nothing once it has passed (deadline.go). A key holding a value that is
// no state of this store fails only the decisions on it (script.go's
// stateError).
// The function library is loaded on first use and whenever Redis lacks
// it (functions.go).
//
// The API follows floodgate's releases: v0, no compatibility promise yet.
package redisstore

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// clientTimeKeep is how much longer than its TTL a key is kept with
// Config.ClientTime.
const clientTimeKeep = time.Hour

// Defaults of Config's zero fields.
const (
	DefaultPrefix         = "fg:"
	DefaultTimeout        = 50 * time.Millisecond
	DefaultBatchMaxSize   = 64
	DefaultBatchMaxWait   = 0
	DefaultBatchPipelines = 2
)

// Config tunes a Store. The zero value is the production default.
type Config struct {
	// Prefix starts every key; "" means DefaultPrefix ("fg:"). It must not
	// contain '{' or '}'.
	Prefix string
	// Timeout bounds each Decide, Reset and Ping, including time spent
	// waiting for a batch; 0 means DefaultTimeout (50ms). A call that runs
	// out of time returns an error wrapping store.ErrUnavailable.
	Timeout time.Duration
	// ClientTime makes decisions at the now passed to Decide. By default
	// (false) the scripts use Redis' own clock, so replicas with skewed
	// clocks agree and the now argument is ignored. Redis expires keys by
	// its own clock, so with ClientTime every key is kept an hour
	// (clientTimeKeep) beyond its state's TTL: a now that runs ahead of
	// Redis' clock (a simulated one) finds the state it still needs, and
	// a state kept past its TTL decides like none.
	ClientTime bool
	// BatchMaxSize is the most script calls one pipeline carries; 0 means
	// DefaultBatchMaxSize (64). 1 disables batching: each Decide sends its
	// own calls at once.
	BatchMaxSize int
	// BatchPipelines is how many pipelines may be in flight at once; 0
	// means DefaultBatchPipelines (2). While they are, calls queue up for
	// the next one.
	BatchPipelines int
	// BatchMaxWait is how long a script call waits for others to share its
	// pipeline beyond those already queued; 0 (the default) and negative
	// values wait for nothing, so a lone caller pays no latency.
	BatchMaxWait time.Duration
	// Mode is the ClientConfig.Mode the client was built with: standalone
	// (the default when empty) or sentinel; a cluster client is always in
	// cluster mode. It tells a misconfiguration from an outage (see
	// CheckServer).
	Mode string
	// SettleWindow is how long a settlement's idempotency key is
	// remembered (Settle; its record's TTL); 0 means
	// store.DefaultSettleWindow.
	SettleWindow time.Duration
}

// Store is a store.Store on Redis. Its methods may be called concurrently.
type Store struct {
	client redis.UniversalClient
	cfg    Config     // its zero fields set to their defaults; Mode ModeCluster for a cluster client
	lib    library    // the scripts, as Redis functions
	batch  *batcher   // nil when batching is disabled
	clock  redisClock // Redis' clock against this host's (deadline.go)
	// scripted is set by a Ping that ran the scripting probe and passed,
	// and cleared by any Ping that fails: later Pings skip the probe, so a
	// healthy Redis counts no script call for health checks.
	scripted atomic.Bool
}

var _ store.Store = (*Store)(nil)

// New returns a Store deciding on client. The caller keeps ownership of
// client: Close stops the Store's batcher but does not close the client.
// client should send no command again after a failure (go-redis'
// MaxRetries -1, as NewClient's client): Redis may have run the first,
// and a decision run twice charges, or refunds, twice.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if strings.ContainsAny(cfg.Prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q must not contain '{' or '}' (they would move the hash tag)", cfg.Prefix)
	}
	cfg.Prefix = cmp.Or(cfg.Prefix, DefaultPrefix)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.BatchMaxSize = cmp.Or(cfg.BatchMaxSize, DefaultBatchMaxSize)
	cfg.BatchPipelines = cmp.Or(cfg.BatchPipelines, DefaultBatchPipelines)
	if cfg.SettleWindow <= 0 {
		cfg.SettleWindow = store.DefaultSettleWindow
	}
	if cfg.Timeout < 0 || cfg.BatchMaxSize < 0 || cfg.BatchPipelines < 0 {
		return nil, errors.New("redisstore: Timeout, BatchMaxSize and BatchPipelines must not be negative")
	}
	if _, ok := client.(*redis.ClusterClient); ok {
		cfg.Mode = ModeCluster
	} else if cfg.Mode != ModeSentinel {
		cfg.Mode = ModeStandalone
	}
	s := &Store{client: client, cfg: cfg, lib: newLibrary(luaSource())}
	if cfg.BatchMaxSize > 1 {
		s.batch = newBatcher(s)
	}
	return s, nil
}

// header is the header of a call made at now: Redis' clock unless
// Config.ClientTime.
func (s *Store) header(now time.Time) header {
	h := header{nowMs: -1, calMs: now.UnixMilli()}
	if s.cfg.ClientTime {
		h.nowMs = max(h.calMs, 0)
		h.keepMs = clientTimeKeep.Milliseconds()
	}
	return h
}

// call is one script call: the requests of one slot.
type call struct {
	slot int // the keys' cluster slot (0 on a standalone Redis)
	h    header
	keys []string
	buf  []byte // the header, then the requests (see script.go)
	idx  []int  // positions in the Decide call's requests

	reply any
	err   error
	done  chan *call // receives the call once reply or err is set (capacity 1)
}

// callPool recycles calls with their keys, request bytes and channel, so
// a decision allocates little beyond go-redis' command.
var callPool = sync.Pool{New: func() any { return &call{done: make(chan *call, 1)} }}

// release returns calls to callPool. Only calls whose result was
// received may go back: a call abandoned on a timeout may still be in a
// pipeline, and its channel may still receive.
func release(calls []*call) {
	for _, c := range calls {
		clear(c.keys)
		c.keys, c.buf, c.idx = c.keys[:0], c.buf[:0], c.idx[:0]
		c.reply, c.err = nil, nil
		callPool.Put(c)
	}
}

// Decide implements store.Store.
func (s *Store) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: decide: %w", err)
	}
	if err := store.ValidateDecide(reqs, out); err != nil {
		return fmt.Errorf("redisstore: decide: %w", err)
	}
	if len(reqs) == 0 {
		return nil
	}
	h := s.header(now)
	tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	h.deadlineMs = s.deadlineMs(tctx)
	calls := s.plan(reqs, h, 1)
	if len(calls) > 1 && hasRefund(reqs) {
		// Refunds cannot be taken back exactly, so a batch that spans
		// slots and holds one is probed first: if anything is denied,
		// nothing is written anywhere.
		probe := h
		probe.probe = true
		probes := s.plan(reqs, probe, 1)
		if err := s.run(tctx, probes); err != nil {
			return s.wrap(ctx, "decide", err)
		}
		denied, err := decodeAll(probes, reqs, out)
		if err != nil || denied {
			return err
		}
		release(probes)
	}
	if err := s.run(tctx, calls); err != nil {
		return s.wrap(ctx, "decide", err)
	}
	denied, err := decodeAll(calls, reqs, out)
	if (denied || err != nil) && len(calls) > 1 {
		s.refund(tctx, reqs, out, calls, h)
	}
	if err != nil {
		return err
	}
	release(calls)
	return nil
}

// hasRefund reports whether a request gives units back, charges debt
// (whose unrecorded part a refund on deny would over-refund, and whose
// charge beyond its bound cannot be taken back exactly either) or takes
// slots of an algorithm that waits (algorithms.Facts.Waits; no refund
// frees a slot): a batch across slots holding one is probed before it is
// charged.
func hasRefund(reqs []store.Request) bool {
	return slices.ContainsFunc(reqs, func(r store.Request) bool {
		return r.Cost < 0 || r.Mode&algorithms.Debt != 0 || r.Cost > 0 && r.Limit.Algorithm.Facts().Waits
	})
}

// decodeAll reads every call's reply into out. It reports whether a
// request with a positive cost was denied, and the first call's error; a
// call that failed keeps its error (a malformed state fails its own call
// only, and refund skips it).
func decodeAll(calls []*call, reqs []store.Request, out []algorithms.Decision) (denied bool, err error) {
	for _, c := range calls {
		if c.err == nil {
			c.err = decodeCall(c, reqs, out)
		}
		if c.err != nil && err == nil {
			err = fmt.Errorf("redisstore: decide: %w", c.err)
		}
	}
	if err != nil {
		return false, err
	}
	for i := range reqs {
		if reqs[i].Cost > 0 && !out[i].Allowed {
			denied = true
		}
	}
	return denied, nil
}

// plan groups reqs into script calls, one per slot (one in all unless the
// client is a cluster client), in order of first appearance, each cost
// times sign (1 charges, -1 refunds).
func (s *Store) plan(reqs []store.Request, h header, sign int64) []*call {
	var calls []*call
	for i := range reqs {
		r := &reqs[i]
		tag, sl := hashTag(r.Key), 0
		if s.cfg.Mode == ModeCluster {
			sl = slot(tag)
		}
		var c *call
		for _, o := range calls {
			if o.slot == sl {
				c = o
				break
			}
		}
		if c == nil {
			c = callPool.Get().(*call)
			c.slot, c.h, c.buf = sl, h, appendHeader(c.buf, h)
			calls = append(calls, c)
		}
		c.keys = append(c.keys, stateKey(s.cfg.Prefix, r.Limit.Algorithm, tag, r.Scope))
		c.buf = appendRequest(c.buf, r.Limit, sign*r.Cost, r.DryRun, r.Mode, h)
		c.idx = append(c.idx, i)
	}
	return calls
}

// decodeCall reads the reply of c, a call Redis answered, into out at c's
// positions in the Decide call, whose requests are reqs.
func decodeCall(c *call, reqs []store.Request, out []algorithms.Decision) error {
	caps := func(j int) int64 { return reqs[c.idx[j]].Limit.Capacity() }
	// A call that holds every request in order (always so off a cluster)
	// decodes in place.
	inPlace := len(c.idx) == len(out) && (len(out) == 0 || c.idx[len(out)-1] == len(out)-1)
	got := out
	if !inPlace {
		got = make([]algorithms.Decision, len(c.idx))
	}
	err := decodeReply(c.reply, got, caps)
	if se, ok := errors.AsType[*stateError](err); ok {
		se.key = c.keys[se.index]
	}
	if err == nil && !inPlace {
		for j, i := range c.idx {
			out[i] = got[j]
		}
	}
	return err
}

// refund gives back the charges of the calls that neither failed nor
// denied after another slot's call denied or failed, but those of an
// algorithm that waits, whose slots no give-back frees (hasRefund probed
// them). Best effort: see the package doc. Its failure leaves an
// over-count that decays, and the deny stands, so it is not reported.
func (s *Store) refund(ctx context.Context, reqs []store.Request, out []algorithms.Decision, calls []*call, h header) {
	var back []store.Request
	for _, c := range calls {
		if c.err != nil || slices.ContainsFunc(c.idx, func(i int) bool { return reqs[i].Cost > 0 && !out[i].Allowed }) {
			continue
		}
		for _, i := range c.idx {
			if r := reqs[i]; r.Cost > 0 && !r.DryRun && out[i].Allowed && !r.Limit.Algorithm.Facts().Waits {
				back = append(back, r)
			}
		}
	}
	if len(back) > 0 {
		_ = s.run(ctx, s.plan(back, h, -1))
	}
}

// Close implements store.Store: it stops the batcher, after sending what
// it holds. It does not close the client, which belongs to the caller.
func (s *Store) Close() error {
	if s.batch != nil {
		s.batch.close()
	}
	return nil
}

// unavailable reports whether err means Redis is unreachable, too slow,
// or temporarily unable to serve (loading, failing over, closed).
func unavailable(err error) bool {
	var ne net.Error
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, errClosed),
		errors.Is(err, redis.ErrPoolTimeout), // no free connection within PoolTimeout
		errors.As(err, &ne),
		// A TLS handshake that fails (an untrusted or wrong certificate,
		// which the client reports as a CertificateVerificationError, or a
		// plaintext port) leaves Redis as unreachable as a refused dial.
		errors.As(err, &cv), errors.As(err, &rh):
		return true
	}
	return hasPrefix(err, "LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY", "BUSY", "NOREPLICAS", "MOVED", "ASK")
}

// errClosed is returned by calls made after Close.
var errClosed = errors.New("redisstore: store closed")
