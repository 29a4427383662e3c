// Package rlqs serves Envoy's Rate Limit Quota Service,
// envoy.service.rate_limit_quota.v3.RateLimitQuotaService: Envoy reports
// each bucket's usage on one bidirectional stream and this server answers
// with quota assignments. docs/rlqs.md says how buckets match the config,
// how a budget is shared across Envoys and replicas, and when assignments
// are pushed.
//
// Every stream's sends happen on its own handler goroutine: other streams
// only mark its buckets dirty and wake it, so a slow reader blocks no one
// but itself.
package rlqs

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store"
)

// Defaults of Settings' zero values.
const (
	// DefaultMaxBucketsPerStream bounds the buckets one stream may
	// subscribe; a report past it ends the stream (ResourceExhausted).
	DefaultMaxBucketsPerStream = 1000
	// DefaultAssignmentTTL is the least assignment_time_to_live sent (it
	// is raised to outlive the gap between a bucket's reports).
	DefaultAssignmentTTL = 10 * time.Second
	// DefaultMaxKeyBytes bounds the domain and each bucket id key and value.
	DefaultMaxKeyBytes = 4096
	// DefaultMaxStreamBytes bounds the bytes of the buckets one stream
	// holds (heldBytes); a report past it ends the stream
	// (ResourceExhausted).
	DefaultMaxStreamBytes = 4 << 20
	// DefaultMaxTotalBytes bounds the same for all streams together.
	DefaultMaxTotalBytes = 128 << 20
	// demandTimeout bounds a ForgetDemand at a stream's end.
	demandTimeout = 2 * time.Second
	// logEvery is the least time between two log lines of one kind (demand
	// store failures, dropped bucket ids); the next line counts those between.
	logEvery = 10 * time.Second
)

// MaxBucketIDBytes bounds the keys and values of one bucket id together; a
// report past it ends the stream (InvalidArgument).
const MaxBucketIDBytes = 8192

// RuleSource returns the config in force.
type RuleSource interface {
	Current() *rules.Set
}

// Settings configure a Service. Rules and Demand are required.
type Settings struct {
	// Rules is the config in force (quota_buckets, quota_unmatched).
	Rules RuleSource
	// Demand aggregates demand across replicas.
	Demand store.DemandStore
	// MaxBucketsPerStream: see DefaultMaxBucketsPerStream.
	MaxBucketsPerStream int
	// MaxKeyBytes: see DefaultMaxKeyBytes.
	MaxKeyBytes int
	// MaxStreamBytes: see DefaultMaxStreamBytes.
	MaxStreamBytes int64
	// MaxTotalBytes: see DefaultMaxTotalBytes.
	MaxTotalBytes int64
	// AssignmentTTL: see DefaultAssignmentTTL.
	AssignmentTTL time.Duration
	// Shares shape the fair shares; zero fields take DefaultFloor and
	// DefaultCap.
	Shares ShareParams
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Metrics; nil records to a registry of its own, which nothing exports.
	Metrics *Metrics
}

// Service serves StreamRateLimitQuotas.
type Service struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer

	cfg        RuleSource
	demand     store.DemandStore
	maxBuckets int
	keyBytes   int   // the domain, each bucket id key and value
	maxStream  int64 // bytes of bucket ids per stream
	maxTotal   int64 // bytes of bucket ids in all
	held       atomic.Int64
	ttl        time.Duration
	shares     ShareParams
	now        func() time.Time
	log        *slog.Logger
	m          *Metrics
	replica    string // this process' part of reporter names
	seq        atomic.Uint64

	failures   observability.LogLimiter // demand store failures
	refusedIDs observability.LogLimiter // bucket ids dropped (validID)

	mu       sync.Mutex
	streams  map[*stream]struct{}
	groups   map[string]*group // by store key
	draining bool
	drained  chan struct{} // closed when draining and no stream is left
}

var _ rlqsv3.RateLimitQuotaServiceServer = (*Service)(nil)

// group is the local members of one shared budget (a quota entry and a
// bucket id) and the budget's latest totals across replicas. Guarded by
// Service.mu.
type group struct {
	key     string
	members map[*sub]struct{}
	total   store.DemandTotal
	totalAt time.Time // zero until the store answered once
	// pushed is the total when the members were last woken: they are
	// woken again only when it moves 5% (steady reports cost O(1)).
	pushed store.DemandTotal
	// wokeAt is when a report last woke the members (at most every
	// wakeEvery, or a fleet connecting at once costs O(members²)).
	wokeAt time.Time
}

// wakeEvery is the least time between two wake-ups of a budget's members
// by reports (leaves always wake them).
const wakeEvery = 250 * time.Millisecond

// wakeOthersLocked wakes every member of g but except to recompute its
// share, when g's total moved 5% or more since the last wake-up; it
// reports whether it woke any.
func (g *group) wakeOthersLocked(except *sub) bool {
	if !moved(g.pushed, g.total) {
		return false
	}
	g.pushed = g.total
	woke := false
	for m := range g.members {
		if m != except {
			m.st.markDirty(m, false)
			woke = true
		}
	}
	return woke
}

// moved reports whether b is 5% or more away from a in reporters or in
// demand.
func moved(a, b store.DemandTotal) bool {
	return far(a.Reporters, b.Reporters) || far(a.MilliRPS, b.MilliRPS)
}

// far reports whether y is 5% or more away from x.
func far(x, y int64) bool {
	d := max(x-y, y-x)
	return d > 0 && d*20 >= max(x, 1)
}

// New returns a Service.
func New(s Settings) *Service {
	if s.Shares.Floor <= 0 || s.Shares.Floor >= 1 {
		s.Shares.Floor = DefaultFloor
	}
	if s.Shares.Cap < 1 {
		s.Shares.Cap = DefaultCap
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	s.Logger = cmp.Or(s.Logger, slog.Default())
	if s.Metrics == nil {
		s.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Service{
		cfg:        s.Rules,
		demand:     s.Demand,
		maxBuckets: cmp.Or(max(s.MaxBucketsPerStream, 0), DefaultMaxBucketsPerStream),
		keyBytes:   cmp.Or(max(s.MaxKeyBytes, 0), DefaultMaxKeyBytes),
		maxStream:  cmp.Or(max(s.MaxStreamBytes, 0), DefaultMaxStreamBytes),
		maxTotal:   cmp.Or(max(s.MaxTotalBytes, 0), DefaultMaxTotalBytes),
		ttl:        cmp.Or(max(s.AssignmentTTL, 0), DefaultAssignmentTTL),
		shares:     s.Shares, now: s.Now, log: s.Logger, m: s.Metrics,
		replica: hex.EncodeToString(b[:]),
		streams: map[*stream]struct{}{}, groups: map[string]*group{},
	}
}

// config is the config in force; nil (no quota buckets) without a source.
func (s *Service) config() *rules.Set {
	if s.cfg == nil {
		return nil
	}
	return s.cfg.Current()
}

// ConfigChanged makes every open stream re-match its buckets against the
// config now in force: changed assignments are pushed, buckets whose
// entry is gone are abandoned. Call it after each reload.
func (s *Service) ConfigChanged() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		st.reconfig.Store(true)
		st.wakeUp()
	}
}

// Drain ends every open stream cleanly, each sending the current
// assignment of all its buckets first (Envoy carries on with them while it
// reconnects), and refuses new streams with Unavailable. Call it before
// grpc.Server.GracefulStop, which would wait for the streams forever. It
// waits until the streams have ended or ctx is done.
func (s *Service) Drain(ctx context.Context) {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		s.drained = make(chan struct{})
		for st := range s.streams {
			close(st.drain)
		}
		if len(s.streams) == 0 {
			close(s.drained)
		}
	}
	done := s.drained
	s.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// StreamRateLimitQuotas implements rlqsv3.RateLimitQuotaServiceServer.
func (s *Service) StreamRateLimitQuotas(srv rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	st := &stream{
		s: s, srv: srv, id: s.seq.Add(1),
		subs:   map[string]*sub{},
		dirty:  map[*sub]bool{},
		wake:   make(chan struct{}, 1),
		drain:  make(chan struct{}),
		opened: s.now(),
	}
	if !s.register(st) {
		return status.Error(codes.Unavailable, "server shutting down: reconnect to another replica")
	}
	defer s.unregister(st)
	err := st.run(srv.Context())
	if err != nil {
		s.m.streamErrors.WithLabelValues(status.Code(err).String()).Inc()
	}
	if status.Code(err) == codes.Internal {
		// Not the client's doing (its mistakes end InvalidArgument or
		// ResourceExhausted): every bucket of that Envoy lost its
		// assignment, so say why.
		s.log.Error("quota: stream ended by a server error; its buckets lose their assignments", "domain", trim(st.domain), "buckets", len(st.subs), "err", err)
	}
	return err
}

func (s *Service) register(st *stream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.streams[st] = struct{}{}
	s.m.streams.Inc()
	return true
}

// unregister removes a finished stream: its buckets leave their groups,
// the other local members are pushed their new shares, and its demand is
// forgotten in the store (other replicas see it at their next report).
func (s *Service) unregister(st *stream) {
	var forget []*sub
	s.mu.Lock()
	delete(s.streams, st)
	for _, sb := range st.subs {
		if sb.g != nil {
			s.leaveLocked(sb)
			forget = append(forget, sb)
		}
	}
	s.m.streams.Dec()
	s.m.buckets.Sub(float64(len(st.subs)))
	s.release(st.bytes)
	st.bytes = 0
	if s.draining && len(s.streams) == 0 {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
	s.mu.Unlock()
	if len(forget) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), demandTimeout)
	defer cancel()
	for _, sb := range forget {
		if err := s.demand.ForgetDemand(ctx, sb.key, sb.reporter); err != nil {
			s.log.Warn("quota: could not forget a closed stream's demand; it expires with its TTL", "err", err)
			break
		}
	}
}

// reserve counts n more bytes of bucket ids held by st, or refuses them
// when st or the Service would pass its bound.
func (s *Service) reserve(st *stream, n int64, field string) error {
	if st.bytes+n > s.maxStream {
		return status.Errorf(codes.ResourceExhausted, "%s: the stream's bucket ids would hold %d bytes, more than %d: report fewer or shorter bucket ids on a stream", field, st.bytes+n, s.maxStream)
	}
	if total := s.held.Add(n); total > s.maxTotal {
		s.held.Add(-n)
		return status.Errorf(codes.ResourceExhausted, "%s: the server holds %d bytes of bucket ids from all streams, the most allowed: retry later or on another replica", field, total-n)
	}
	st.bytes += n
	s.m.idBytes.Add(float64(n))
	return nil
}

// release stops counting n bytes of bucket ids.
func (s *Service) release(n int64) {
	s.held.Add(-n)
	s.m.idBytes.Sub(float64(n))
}

// groupKey is the store key of the budget of bucket id canon under the
// quota entry id: 22 base64url characters of a SHA-256.
func groupKey(entryID, canon string) string {
	sum := sha256.Sum256([]byte(entryID + "\x00" + canon))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// joinLocked puts sb in the group of its key.
func (s *Service) joinLocked(sb *sub) {
	g := s.groups[sb.key]
	if g == nil {
		g = &group{key: sb.key, members: map[*sub]struct{}{}}
		s.groups[sb.key] = g
	}
	g.members[sb] = struct{}{}
	sb.g = g
}

// leaveLocked takes sb out of its group, takes its demand out of the
// group's totals and wakes the other members to their larger shares.
func (s *Service) leaveLocked(sb *sub) {
	g := sb.g
	if g == nil {
		return
	}
	sb.g = nil
	delete(g.members, sb)
	if len(g.members) == 0 {
		delete(s.groups, g.key)
		return
	}
	if !g.totalAt.IsZero() {
		g.total.Reporters = max(g.total.Reporters-1, 1)
		g.total.MilliRPS = max(g.total.MilliRPS-sb.demand.Load(), 0)
	}
	g.wakeOthersLocked(nil)
}
