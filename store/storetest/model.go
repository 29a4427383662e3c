package storetest

import (
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// model is the reference: algorithms.Decide over states kept in a map, with
// the all-or-nothing rule of store.Store.Decide. DryRun requests are decided
// against the state so far and never change it.
type model struct {
	states map[modelKey]algorithms.State
}

type modelKey struct {
	alg algorithms.Algorithm
	key string
}

func newModel() *model { return &model{states: map[modelKey]algorithms.State{}} }

func (m *model) decide(now time.Time, reqs ...store.Request) []algorithms.Decision {
	out := make([]algorithms.Decision, len(reqs))
	tentative := map[modelKey]algorithms.State{}
	denied := false
	for i, r := range reqs {
		k := modelKey{r.Limit.Algorithm, r.Key}
		st, ok := tentative[k]
		if !ok {
			st = m.states[k]
		}
		next, d := algorithms.DecideAt(r.Limit, st, algorithms.Request{NowMs: now.UnixMilli(), Cost: r.Cost, Mode: r.Mode})
		d.Debt, d.Unrecorded = 0, 0 // Decide does not report them
		out[i] = d
		if r.Cost > 0 && !d.Allowed {
			denied = true
		}
		if d.Allowed && r.Cost != 0 && !r.DryRun {
			tentative[k] = next
		}
	}
	if !denied {
		for k, st := range tentative {
			m.states[k] = st
		}
	}
	return out
}

// settle is algorithms.Settle on the model's state of key.
func (m *model) settle(now time.Time, l algorithms.Limit, key string, delta int64) algorithms.Decision {
	k := modelKey{l.Algorithm, key}
	next, d := algorithms.Settle(l, m.states[k], now.UnixMilli(), delta)
	if delta != 0 {
		m.states[k] = next
	}
	return d
}
