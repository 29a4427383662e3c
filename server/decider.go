package server

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/limited"
	"github.com/floodgate/floodgate/internal/localshare"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// decider is what both decision APIs hold from their Settings: the store
// and the rules, the key bound, what answers when the store cannot, and
// the observers.
type decider struct {
	store       store.Store
	cfg         RuleSource
	maxKey      int
	failureMode rules.FailureMode
	local       *localshare.Share
	clock       func() time.Time
	log         *slog.Logger
	metrics     *observability.Metrics
	limited     *limited.Tracker
	failures    *observability.FailureLog // named api in its records
	tracer      spanTracer
	apiName     string                    // the api label of its metrics
	refusals    *observability.LogLimiter // logs of refused give-backs
}

// newDecider is the decider of s deciding with st, the zero settings
// filled: the key bound (DefaultMaxKeyBytes), the failure mode (open),
// the local share (the whole limit, one replica), the clock (time.Now)
// and the logger (slog.Default).
func newDecider(st store.Store, s Settings, api string) decider {
	log := cmp.Or(s.Logger, slog.Default())
	d := decider{
		store:       st,
		cfg:         s.Rules,
		maxKey:      cmp.Or(max(s.MaxKeyBytes, 0), DefaultMaxKeyBytes),
		failureMode: cmp.Or(s.FailureMode, rules.FailureOpen),
		local:       cmp.Or(s.Local, localshare.New(nil, memstore.Config{})),
		clock:       s.Clock,
		log:         log,
		metrics:     s.Metrics,
		limited:     s.Limited,
		failures:    observability.NewFailureLog(log, api),
		tracer:      spanTracer{tracer: s.Tracer, values: s.TraceValues},
		apiName:     api,
		refusals:    new(observability.LogLimiter),
	}
	if d.clock == nil {
		d.clock = time.Now
	}
	return d
}

// modeOf is the failure mode of a limit whose own is m: m, or the
// server's when m is rules.FailureDefault.
func (d *decider) modeOf(m rules.FailureMode) rules.FailureMode { return cmp.Or(m, d.failureMode) }

// failedBatch is a batch the store could not decide: the requests, each
// one's failure mode (never rules.FailureDefault) and where its answer
// goes, all of one length.
type failedBatch struct {
	now   time.Time
	reqs  []store.Request
	modes []rules.FailureMode
	out   []algorithms.Decision
}

// decideFailed answers b, each request by its failure mode: open allows,
// closed denies what would spend, and local decides in the replica's
// memory against the replica's share of the limit (see localshare). The
// local requests are decided together, all or nothing with the others:
// when an open or closed answer denies, the local ones are looked at, not
// charged. When the local share cannot decide either, they answer closed.
func (d *decider) decideFailed(ctx context.Context, b failedBatch) {
	var local store.Batch
	allowed := true
	for i, r := range b.reqs {
		if b.modes[i] == rules.FailureLocal {
			local.Add(i, r)
			continue
		}
		b.out[i] = failedDecision(r, b.modes[i])
		allowed = allowed && b.out[i].Allowed
	}
	if len(local.Reqs) == 0 {
		return
	}
	for k := range local.Reqs {
		local.Reqs[k].DryRun = local.Reqs[k].DryRun || !allowed
	}
	if err := d.local.Decide(ctx, b.now, local.Reqs, local.Sized()); err != nil {
		for _, i := range local.Idx {
			b.out[i] = failedDecision(b.reqs[i], rules.FailureClosed)
		}
		return
	}
	local.Scatter(b.out)
}
