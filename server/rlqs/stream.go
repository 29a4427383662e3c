package rlqs

import (
	"context"
	"errors"
	"io"
	"maps"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store"
)

// stream is one StreamRateLimitQuotas call. Fields without a note are
// used by its handler goroutine only.
type stream struct {
	s      *Service
	srv    rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasServer
	id     uint64
	domain string
	subs   map[string]*sub // by canonical bucket id
	// abandons are AbandonActions to send with the next response.
	abandons []*rlqsv3.RateLimitQuotaResponse_BucketAction

	mu       sync.Mutex    // guards dirty
	dirty    map[*sub]bool // buckets whose assignment to (re)send; true: even if unchanged
	wake     chan struct{} // capacity 1: something is dirty, or reconfig
	reconfig atomic.Bool   // the config changed
	drain    chan struct{} // closed by Service.Drain
	opened   time.Time     // when the stream opened
	bytes    int64         // what its bucket ids hold (Service.reserve)
}

// sub is one bucket subscribed on a stream.
type sub struct {
	st       *stream
	bucket   *rlqsv3.BucketId // as reported (a private copy)
	canon    string
	q        *rules.QuotaBucket // the entry that matched; nil: unmatched
	action   rules.QuotaAction
	rule     string // metric label: q.Name or "unmatched"
	key      string // the budget's store key; "" unless action is QuotaRateLimit
	reporter string
	cost     int64         // bytes its bucket id holds (heldBytes)
	elapsed  time.Duration // the last report's time_elapsed
	// covered is the time the last report is taken to cover, for its
	// demand's time to live: its time_elapsed, but no more than the time
	// since the previous report (firstCover for the first) or maxCover.
	covered    time.Duration
	reportedAt time.Time // the last report's arrival; zero before any
	last       assigned  // the last assignment sent
	// lastStrategy is the strategy last sent (re-sent when unchanged).
	lastStrategy *typev3.RateLimitStrategy
	sent         bool

	demand atomic.Int64 // milli-requests per second; read by other streams' leave
	g      *group       // guarded by Service.mu
}

// assigned is what an assignment says, to tell whether it changed.
type assigned struct {
	action rules.QuotaAction
	rate   algorithms.Limit // the entry's rate, for QuotaRateLimit
	share  int64
	closed bool // DENY_ALL: the store failed and the entry is failure_mode: closed
}

// markDirty asks the stream to send sb's assignment: always when force,
// else only when it changed noticeably. Any goroutine may call it.
func (st *stream) markDirty(sb *sub, force bool) {
	st.mu.Lock()
	st.dirty[sb] = st.dirty[sb] || force
	st.mu.Unlock()
	st.wakeUp()
}

func (st *stream) wakeUp() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// run serves the stream until it ends: reports are read on a goroutine of
// their own, everything else (processing, sends) happens here.
func (st *stream) run(ctx context.Context) error {
	msgs := make(chan *rlqsv3.RateLimitQuotaUsageReports)
	errc := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			m, err := st.srv.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-done:
				return
			}
		}
	}()
	for {
		select {
		case m := <-msgs:
			if err := st.handle(ctx, m); err != nil {
				return err
			}
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil // the client closed its side
			}
			return err
		case <-st.wake:
		case <-st.drain:
			for _, sb := range st.subs {
				st.markDirty(sb, true)
			}
			return st.flush()
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		if st.reconfig.Swap(false) {
			st.reconfigure()
		}
		if err := st.flush(); err != nil {
			return err
		}
	}
}

// handle processes one message of reports.
func (st *stream) handle(ctx context.Context, m *rlqsv3.RateLimitQuotaUsageReports) error {
	s := st.s
	switch d := m.GetDomain(); {
	case st.domain == "" && d == "":
		return invalidf("domain", "empty: the first message of a stream must name the domain")
	case len(d) > s.keyBytes:
		return invalidf("domain", "%d bytes, longer than %d (--max-key-bytes)", len(d), s.keyBytes)
	case st.domain == "":
		st.domain = d
	case d != "" && d != st.domain:
		return invalidf("domain", "%q differs from the stream's domain %q: open another stream for another domain", trim(d), trim(st.domain))
	}
	usages := m.GetBucketQuotaUsages()
	elapsed := make([]time.Duration, len(usages))
	for i, u := range usages {
		d, err := s.checkUsage(u, i)
		if err != nil {
			return err
		}
		elapsed[i] = d
	}
	cfg := s.config()
	now := s.now()
	var reps []store.DemandReport
	var repSubs []*sub
	for i, u := range usages {
		b := u.GetBucketId().GetBucket()
		if !validID(b) {
			if n, ok := s.refusedIDs.Allow(now, logEvery); ok {
				s.log.Warn("quota: a bucket id that is not UTF-8 was dropped: no assignment is sent for it (an answer holding it would be refused whole by a strict proto3 parser); the stream's other buckets go on",
					"domain", trim(st.domain), "field", usageField(i)+".bucket_id", "dropped_since_last_log", n)
			}
			s.m.refusedIDs.Inc()
			continue
		}
		canon := canonical(b)
		sb := st.subs[canon]
		if sb == nil {
			if len(st.subs) >= s.maxBuckets {
				return status.Errorf(codes.ResourceExhausted, "%s.bucket_id: the stream already has %d buckets, the most allowed (--quota-max-buckets-per-stream)", usageField(i), s.maxBuckets)
			}
			cost := heldBytes(b, canon)
			if err := s.reserve(st, cost, usageField(i)+".bucket_id"); err != nil {
				return err
			}
			sb = &sub{st: st, bucket: &rlqsv3.BucketId{Bucket: maps.Clone(b)}, canon: canon, cost: cost,
				reporter: s.replica + "/" + strconv.FormatUint(st.id, 10)}
			st.subs[canon] = sb
			s.m.buckets.Inc()
			st.bind(sb, cfg)
		}
		allowed, denied := u.GetNumRequestsAllowed(), u.GetNumRequestsDenied()
		s.m.reports.Inc()
		s.m.requests.WithLabelValues(sb.rule, "allowed").Add(float64(allowed))
		s.m.requests.WithLabelValues(sb.rule, "denied").Add(float64(denied))
		if d := elapsed[i]; d > 0 {
			sb.elapsed = d
			over, since := max(d, minElapsed), max(now.Sub(st.opened), firstCover)
			if !sb.reportedAt.IsZero() {
				since = now.Sub(sb.reportedAt)
				over = max(over, since)
			}
			sb.covered = min(d, max(since, 0), maxCover)
			sb.demand.Store(min(demandOf(float64(allowed)+float64(denied), over), budgetRate(sb)))
		}
		sb.reportedAt = now
		if sb.key != "" {
			reps = append(reps, store.DemandReport{Key: sb.key, Reporter: sb.reporter, MilliRPS: sb.demand.Load(), TTL: s.demandTTL(sb)})
			repSubs = append(repSubs, sb)
		}
		st.markDirty(sb, true)
	}
	if len(reps) > 0 {
		s.aggregate(ctx, now, reps, repSubs)
	}
	return nil
}

// demandOf is count requests over d in milli-requests per second,
// bounded so sums cannot overflow. handle never takes d shorter than the
// time the report really covered, so no report can claim a rate.
func demandOf(count float64, d time.Duration) int64 {
	v := count * 1000 / d.Seconds()
	return int64(min(v, 1e15))
}

// budgetRate is the most demand a report of sb may claim, in
// milli-requests per second: its budget's whole rate, so no report pushes
// the other reporters to the floor share.
func budgetRate(sb *sub) int64 {
	if sb.q == nil || sb.q.Limit == nil { // only rate_limit entries have a Limit
		return math.MaxInt64
	}
	r := sb.q.Limit.Rate
	if r.Period <= 0 {
		return 0
	}
	return int64(min(float64(r.Requests)*1000/r.Period.Seconds(), 1e15))
}

// Bounds on the time a report is taken to cover for its demand's time
// to live (sub.covered).
const (
	// firstCover: a bucket's first report may cover this long even on a
	// fresh stream (a reconnecting Envoy reports since its last report).
	firstCover = time.Minute
	// maxCover: no report covers more, whatever the intervals.
	maxCover = 30 * time.Minute
)

// demandTTL is how long a report counts: two of the intervals it covered
// (sub.covered), and at least the assignment TTL.
func (s *Service) demandTTL(sb *sub) time.Duration { return max(2*sb.covered, s.ttl) }

// assignmentTTL is the time to live of sb's assignments: at least the
// configured TTL, and more than two reporting intervals.
func (s *Service) assignmentTTL(sb *sub) time.Duration { return max(s.ttl, 2*sb.elapsed+time.Second) }

// bind matches sb against cfg and puts it in its budget's group.
func (st *stream) bind(sb *sub, cfg *rules.Set) {
	s := st.s
	q := cfg.MatchQuota(st.domain, sb.bucket.GetBucket())
	sb.q, sb.rule, sb.action = q, unmatchedRule, cfg.QuotaUnmatched(st.domain)
	if q != nil {
		sb.rule, sb.action = q.Name, q.Action
	}
	key := ""
	if sb.action == rules.QuotaRateLimit {
		key = groupKey(q.ID, sb.canon)
	}
	if key == sb.key {
		return
	}
	old := sb.key
	s.mu.Lock()
	s.leaveLocked(sb)
	sb.key = key
	if key != "" {
		s.joinLocked(sb)
	}
	s.mu.Unlock()
	if old != "" {
		s.forget(old, sb.reporter)
	}
}

// forget drops a reporter's demand on key in the store.
func (s *Service) forget(key, reporter string) {
	ctx, cancel := context.WithTimeout(context.Background(), demandTimeout)
	defer cancel()
	if err := s.demand.ForgetDemand(ctx, key, reporter); err != nil {
		s.log.Warn("quota: could not forget a reporter's demand; it expires with its TTL", "err", err)
	}
}

// aggregate reports demand to the store, records the budgets' totals and
// wakes the budgets' other local members. When the store fails, a budget
// keeps totals younger than the assignment TTL, else this replica's own
// view (DENY_ALL for failure_mode: closed).
func (s *Service) aggregate(ctx context.Context, now time.Time, reps []store.DemandReport, subs []*sub) {
	out := make([]store.DemandTotal, len(reps))
	err := s.demand.ReportDemand(ctx, now, reps, out)
	if err != nil {
		s.m.demandErrors.Inc()
		if n, ok := s.failures.Allow(now, logEvery); ok {
			s.log.Warn("quota: demand not aggregated across replicas; shares come from the last totals or this replica's view",
				"err", err, "failures_since_last_log", n)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sb := range subs {
		g := sb.g
		if g == nil {
			continue
		}
		switch {
		case err == nil:
			g.total, g.totalAt = out[i], now
		case g.totalAt.IsZero() || now.Sub(g.totalAt) > s.ttl:
			g.totalAt = time.Time{}
			g.total = store.DemandTotal{}
			for m := range g.members {
				g.total.Reporters++
				g.total.MilliRPS += m.demand.Load()
			}
		}
		if now.Sub(g.wokeAt) >= wakeEvery && g.wakeOthersLocked(sb) {
			g.wokeAt = now
		}
	}
}

// reconfigure re-matches every bucket against the config in force.
func (st *stream) reconfigure() {
	cfg := st.s.config()
	for _, sb := range st.subs {
		q := cfg.MatchQuota(st.domain, sb.bucket.GetBucket())
		if q == nil && (sb.q != nil || cfg.QuotaUnmatched(st.domain) == rules.QuotaAbandon) {
			st.abandon(sb) // its entry is gone: the server no longer governs it
			continue
		}
		st.bind(sb, cfg)
		st.markDirty(sb, false)
	}
}

// abandon drops sb and queues its AbandonAction.
func (st *stream) abandon(sb *sub) {
	s := st.s
	s.mu.Lock()
	s.leaveLocked(sb)
	s.mu.Unlock()
	if sb.key != "" {
		s.forget(sb.key, sb.reporter)
	}
	delete(st.subs, sb.canon)
	st.bytes -= sb.cost
	s.release(sb.cost)
	s.m.buckets.Dec()
	s.m.assignments.WithLabelValues("abandon").Inc()
	st.abandons = append(st.abandons, &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId:     sb.bucket,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{}},
	})
}

// assignment is sb's assignment now.
func (st *stream) assignment(sb *sub) (assigned, *typev3.RateLimitStrategy) {
	switch sb.action {
	case rules.QuotaAllowAll:
		return assigned{action: sb.action}, Blanket(typev3.RateLimitStrategy_ALLOW_ALL)
	case rules.QuotaDenyAll:
		return assigned{action: sb.action}, Blanket(typev3.RateLimitStrategy_DENY_ALL)
	case rules.QuotaRateLimit:
	default:
		return assigned{action: sb.action}, nil
	}
	l := sb.q.Limit
	if l.ShadowMode {
		return assigned{action: rules.QuotaAllowAll}, Blanket(typev3.RateLimitStrategy_ALLOW_ALL)
	}
	s := st.s
	s.mu.Lock()
	var total store.DemandTotal
	degraded := true
	if g := sb.g; g != nil {
		total, degraded = g.total, g.totalAt.IsZero()
	}
	s.mu.Unlock()
	if degraded && l.FailureMode == rules.FailureClosed {
		return assigned{action: sb.action, rate: l.Rate, closed: true}, Blanket(typev3.RateLimitStrategy_DENY_ALL)
	}
	if total.Reporters == 0 {
		total = store.DemandTotal{Reporters: 1, MilliRPS: sb.demand.Load()}
	}
	share := s.shares.Share(l.Rate.Requests, l.Rate.Period, total, sb.demand.Load())
	return assigned{action: sb.action, rate: l.Rate, share: share}, Strategy(l.Rate, share)
}

// changed reports whether b differs enough from a to send it: another
// action or rate, a smaller share, or a share 5% or more larger. Envoy
// refills its limiter on every new strategy, so a slightly larger share
// is not worth one; a smaller share is always sent, so the shares in
// force never add up to more than the budget.
func changed(a, b assigned) bool {
	if a.action != b.action || a.rate != b.rate || a.closed != b.closed || b.share < a.share {
		return true
	}
	return far(a.share, b.share)
}

// flush sends the assignments of the dirty buckets, and queued abandons,
// in one response.
func (st *stream) flush() error {
	var dirty map[*sub]bool
	st.mu.Lock()
	if len(st.dirty) > 0 {
		dirty, st.dirty = st.dirty, map[*sub]bool{}
	}
	st.mu.Unlock()
	actions := st.abandons
	st.abandons = nil
	for sb, force := range dirty {
		if st.subs[sb.canon] != sb {
			continue // abandoned meanwhile
		}
		a, strategy := st.assignment(sb)
		if a.action == rules.QuotaAbandon {
			st.abandon(sb)
			actions = append(actions, st.abandons...)
			st.abandons = nil
			continue
		}
		if sb.sent && !changed(sb.last, a) {
			if !force {
				continue
			}
			a, strategy = sb.last, sb.lastStrategy // extend, do not reset
		}
		sb.last, sb.lastStrategy, sb.sent = a, strategy, true
		actions = append(actions, &rlqsv3.RateLimitQuotaResponse_BucketAction{
			BucketId: sb.bucket,
			BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
				QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
					AssignmentTimeToLive: durationpb.New(st.s.assignmentTTL(sb)),
					RateLimitStrategy:    strategy,
				},
			},
		})
		st.s.m.assignments.WithLabelValues(a.action.String()).Inc()
	}
	if len(actions) == 0 {
		return nil
	}
	return st.srv.Send(&rlqsv3.RateLimitQuotaResponse{BucketAction: actions})
}
