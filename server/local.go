package server

import (
	"context"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/localshare"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// failedDecisions answers reqs when the store could not decide, each by
// its failure mode (modes[i], never rules.FailureDefault): open allows,
// closed denies what would spend, and local decides in the replica's
// memory against the replica's share of the limit (see localshare). The
// local requests are decided together, all or nothing with the others:
// when an open or closed answer denies, the local ones are looked at, not
// charged. When the local share cannot decide either, they answer closed.
func failedDecisions(ctx context.Context, local *localshare.Share, now time.Time, reqs []store.Request, modes []rules.FailureMode, out []algorithms.Decision) {
	var idx []int
	allowed := true
	for i, r := range reqs {
		if modes[i] == rules.FailureLocal {
			idx = append(idx, i)
			continue
		}
		out[i] = failedDecision(r, modes[i])
		allowed = allowed && out[i].Allowed
	}
	if len(idx) == 0 {
		return
	}
	sub := make([]store.Request, len(idx))
	for k, i := range idx {
		sub[k] = reqs[i]
		sub[k].DryRun = sub[k].DryRun || !allowed
	}
	got := make([]algorithms.Decision, len(idx))
	if err := local.Decide(ctx, now, sub, got); err != nil {
		for _, i := range idx {
			out[i] = failedDecision(reqs[i], rules.FailureClosed)
		}
		return
	}
	for k, i := range idx {
		out[i] = got[k]
	}
}

// localOrDefault is s, or a share of the whole limit (one replica) when s
// is nil.
func localOrDefault(s *localshare.Share) *localshare.Share {
	if s == nil {
		return localshare.New(nil, memstore.Config{})
	}
	return s
}
