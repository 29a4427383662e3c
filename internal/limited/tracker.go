// Package limited answers "who is being limited right now": for each rule
// (an Envoy domain's rule, a named policy, a class of inline limits) the
// keys with the most denied requests over the last minute and the last 15
// minutes. docs/operations.md ("Who is being limited?") says how it counts.
//
// Memory is fixed whatever the traffic: a rule's Config.Keys
// counters follow the space-saving algorithm, so a key's own counts are
// lower bounds. The windows decay forward (the counters' order does not
// change while time passes). A decision costs a hash, a probe of a fixed
// table and, for a denial, at most log2(Keys) heap swaps; nothing is
// allocated. With Config.Salt the raw key is never kept.
package limited

import (
	"cmp"
	"hash/maphash"
	"maps"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/configview"
	"github.com/floodgate/floodgate/internal/rules"
)

// Defaults of Config.
const (
	// DefaultRules is how many rules are tracked at once.
	DefaultRules = 256
	// DefaultKeys is how many keys each rule counts.
	DefaultKeys = 32
	// MaxKeys bounds Config.Keys.
	MaxKeys = 4096
)

// KeyBytes is how much of a key a counter keeps for display; a longer key
// is counted whole (by its hash) and shown cut, marked truncated.
const KeyBytes = 96

// The decay windows, and the charts' buckets.
const (
	ShortWindow  = time.Minute
	LongWindow   = 15 * time.Minute
	SeriesStep   = 10 * time.Second
	SeriesPoints = 60 // 10 minutes of SeriesStep
)

// Config sizes a Tracker. The zero value tracks DefaultRules rules of
// DefaultKeys keys, and shows keys as they came.
type Config struct {
	// Rules is how many rules are tracked at once; 0 means DefaultRules.
	// The decisions of a rule seen when all are taken are counted in
	// Report.UntrackedDecisions, until a rule unseen for LongWindow gives
	// its place.
	Rules int
	// Keys is how many keys each rule counts; 0 means DefaultKeys, at
	// most MaxKeys.
	Keys int
	// Salt, when set, shows every key as the first 16 hex digits of
	// HMAC-SHA256(Salt, key), computed when the key takes a counter; the
	// key itself is never kept. Replicas with the same salt show the same
	// key alike, so their reports merge.
	Salt []byte
}

func (c Config) rules() int { return cmp.Or(max(c.Rules, 0), DefaultRules) }

func (c Config) keys() int { return min(cmp.Or(max(c.Keys, 0), DefaultKeys), MaxKeys) }

// Kind says which front door a rule belongs to.
type Kind uint8

// The kinds of rules.
const (
	KindEnvoy  Kind = iota + 1 // a rule of an Envoy domain
	KindPolicy                 // a named policy of the Check API
	KindInline                 // the Check API's inline limits of one rate
)

// kindNames are the kinds' names in reports.
var kindNames = [...]string{KindEnvoy: "envoy", KindPolicy: "policy", KindInline: "inline"}

// String is the kind's name in reports.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Tracker counts the denied keys of each rule. Its methods are safe for
// concurrent use; a nil *Tracker tracks nothing.
type Tracker struct {
	cfg  Config
	seed maphash.Seed

	index     atomic.Pointer[map[uint64]*table] // replaced whole when a rule is added
	mu        sync.Mutex                        // serialises adding rules
	lastSweep atomic.Int64                      // unix ns of the last look for stale rules
	untracked atomic.Int64                      // decisions of rules that found no place
}

// New is a Tracker sized by cfg.
func New(cfg Config) *Tracker {
	t := &Tracker{cfg: cfg, seed: maphash.MakeSeed()}
	t.cfg.Keys, t.cfg.Rules = cfg.keys(), cfg.rules()
	m := map[uint64]*table{}
	t.index.Store(&m)
	return t
}

// ObserveCheck counts a Check API decision of key under the named policy
// (kind KindPolicy) or an inline limit of rate (KindInline, rule "").
// shadow says the policy is in shadow mode (its denials are counted; the
// caller was answered allowed).
func (t *Tracker) ObserveCheck(now time.Time, policy string, shadow bool, rate algorithms.Limit, key string, cost int64, allowed bool) {
	if t == nil {
		return
	}
	var rh uint64
	if policy != "" {
		rh = mix(uint64(KindPolicy), maphash.String(t.seed, policy))
	} else {
		rh = mix(uint64(KindInline), inlineHash(rate))
	}
	tb := t.table(now, rh, func() ruleInfo {
		text := configview.NewRateView(rate).Text()
		if policy != "" {
			return ruleInfo{kind: KindPolicy, name: policy, shadow: shadow, limit: text}
		}
		return ruleInfo{kind: KindInline, name: "inline " + text, limit: text}
	})
	observe(tb, now, checkKey{seed: t.seed, key: key}, cost, allowed)
}

// ObserveEnvoy counts an Envoy API decision of the descriptor entries
// under the rule l of domain.
func (t *Tracker) ObserveEnvoy(now time.Time, l *rules.Limit, entries []rules.Entry, cost int64, allowed bool) {
	if t == nil {
		return
	}
	rh := mix(mix(uint64(KindEnvoy), maphash.String(t.seed, l.Domain)), maphash.String(t.seed, l.ID))
	tb := t.table(now, rh, func() ruleInfo {
		info := ruleInfo{kind: KindEnvoy, domain: l.Domain, name: l.Name, id: l.ID, shadow: l.ShadowMode, source: l.Source().String()}
		switch {
		case l.Unlimited:
			info.limit = "unlimited"
		case l.DenyAll:
			info.limit = "0 (deny all)"
		default:
			info.limit = configview.NewRateView(l.Rate).Text()
		}
		return info
	})
	observe(tb, now, envoyKey{seed: t.seed, entries: entries}, cost, allowed)
}

// table is the rule rh's table, added (described by info) when there is
// room; nil when there is none.
func (t *Tracker) table(now time.Time, rh uint64, info func() ruleInfo) *table {
	if tb := (*t.index.Load())[rh]; tb != nil {
		return tb
	}
	return t.add(now, rh, info)
}

// add puts a table for rule rh in the index, in place of a rule unseen
// for LongWindow when all places are taken. The index is copied on write:
// adding a rule is rare, reading it is every decision.
func (t *Tracker) add(now time.Time, rh uint64, info func() ruleInfo) *table {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.index.Load()
	if tb := old[rh]; tb != nil {
		return tb
	}
	stale := uint64(0)
	if len(old) >= t.cfg.Rules {
		last := t.lastSweep.Load()
		if now.UnixNano()-last < int64(time.Second) {
			t.untracked.Add(1)
			return nil
		}
		t.lastSweep.Store(now.UnixNano())
		oldest := now.UnixNano() - int64(LongWindow)
		for h, tb := range old {
			if seen := tb.seen.Load(); seen < oldest {
				stale, oldest = h, seen
			}
		}
		if stale == 0 {
			t.untracked.Add(1)
			return nil
		}
	}
	next := maps.Clone(old)
	delete(next, stale)
	tb := newTable(info(), t.cfg, now)
	next[rh] = tb
	t.index.Store(&next)
	return tb
}

// mix combines two hashes.
func mix(a, b uint64) uint64 {
	a ^= b + 0x9e3779b97f4a7c15 + (a << 6) + (a >> 2)
	a ^= a >> 33
	a *= 0xff51afd7ed558ccd
	a ^= a >> 33
	return a
}

// inlineHash identifies an inline limit's class: its rate.
func inlineHash(r algorithms.Limit) uint64 {
	h := mix(uint64(r.Algorithm), uint64(r.Requests))
	h = mix(h, uint64(r.Period))
	h = mix(h, uint64(r.Burst))
	h = mix(h, uint64(r.Calendar))
	if r.Location != nil {
		h = mix(h, uint64(len(r.Location.String())))
		for _, c := range []byte(r.Location.String()) {
			h = mix(h, uint64(c))
		}
	}
	return h
}

// indexSize is the length of the index of a table of keys counters: the
// least power of two at least 2 × keys.
func indexSize(keys int) int { return 1 << bits.Len(uint(2*keys-1)) }
