package limited

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultK is how many keys per rule a Query returns when it says none.
const DefaultK = 10

// Query selects a Report's rules and keys. The zero value is every rule,
// DefaultK keys each, by denied requests over ShortWindow.
type Query struct {
	// Rule keeps the rules of this name only; "" keeps all.
	Rule string
	// Domain keeps the rules of this Envoy domain only; "" keeps all.
	Domain string
	// K is how many keys per rule, at most the Tracker's Config.Keys; 0
	// means DefaultK.
	K int
	// By ranks keys by "denied" requests (the default) or "cost".
	By string
	// Window ranks over "1m" (the default) or "15m".
	Window string
}

// Validate says what is wrong with q, naming the query parameter.
func (q Query) Validate() error {
	switch {
	case q.K < 0:
		return fmt.Errorf("k: must not be negative, got %d", q.K)
	case q.By != "" && q.By != "denied" && q.By != "cost":
		return fmt.Errorf("by: want denied or cost, got %q", q.By)
	case q.Window != "" && q.Window != "1m" && q.Window != "15m":
		return fmt.Errorf("window: want 1m or 15m, got %q", q.Window)
	}
	return nil
}

// Report is what the Tracker knows at Now: the selected rules, the
// busiest first, each with its heaviest keys.
type Report struct {
	Now time.Time `json:"now"`
	// Hashed says keys are shown as keyed hashes (Config.Salt).
	Hashed bool `json:"hashed"`
	// Replicas is how many replicas' reports were merged into this one.
	Replicas int `json:"replicas"`
	// UntrackedDecisions counts the decisions of rules that found no place
	// (Config.Rules all taken by rules seen within LongWindow).
	UntrackedDecisions int64        `json:"untracked_decisions"`
	Rules              []RuleReport `json:"rules"`
}

// RuleReport is one rule: what it is, its decisions (since it was first
// tracked, and per SeriesStep over the last SeriesPoints steps, oldest
// first) and its heaviest keys.
type RuleReport struct {
	Kind      string      `json:"kind"`
	Domain    string      `json:"domain,omitempty"`
	Rule      string      `json:"rule"`
	ID        string      `json:"id,omitempty"`
	Source    string      `json:"source,omitempty"`
	Limit     string      `json:"limit"`
	Shadow    bool        `json:"shadow,omitempty"`
	Decisions int64       `json:"decisions"`
	Denied    int64       `json:"denied"`
	Series    []Point     `json:"series"`
	Keys      []KeyReport `json:"keys"`
}

// Point is one step of a rule's chart: the decisions and the denials of
// the SeriesStep from At.
type Point struct {
	At        time.Time `json:"at"`
	Decisions int64     `json:"decisions"`
	Denied    int64     `json:"denied"`
}

// KeyReport is one key of a rule. Key is Printable (or a keyed hash);
// Truncated says it was longer than KeyBytes.
type KeyReport struct {
	Key          string    `json:"key"`
	Truncated    bool      `json:"truncated,omitempty"`
	Denied       Counts    `json:"denied"`
	DeniedCost   Counts    `json:"denied_cost"`
	Allowed      Counts    `json:"allowed"`
	AllowedShare Shares    `json:"allowed_share"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
}

// Counts are a key's counts over the decay windows (a steady N a minute
// reads N in 1m) and since it was first seen.
type Counts struct {
	M1    float64 `json:"1m"`
	M15   float64 `json:"15m"`
	Total int64   `json:"total"`
}

// Shares are allowed / (allowed + denied) over the same spans.
type Shares struct {
	M1    float64 `json:"1m"`
	M15   float64 `json:"15m"`
	Total float64 `json:"total"`
}

// Report is the tracker's rules and keys that q selects, at now.
func (t *Tracker) Report(now time.Time, q Query) Report {
	r := Report{Now: now.UTC(), Replicas: 1, Rules: []RuleReport{}}
	if t == nil {
		return r
	}
	r.Hashed = len(t.cfg.Salt) > 0
	r.UntrackedDecisions = t.untracked.Load()
	for _, tb := range *t.index.Load() {
		if q.Rule != "" && tb.info.name != q.Rule || q.Domain != "" && tb.info.domain != q.Domain {
			continue
		}
		r.Rules = append(r.Rules, tb.report(now))
	}
	finish(&r, q, t.cfg.Keys)
	return r
}

// report is the table's rule with every key it counts.
func (tb *table) report(now time.Time) RuleReport {
	rr := RuleReport{
		Kind: tb.info.kind.String(), Domain: tb.info.domain, Rule: tb.info.name, ID: tb.info.id,
		Source: tb.info.source, Limit: tb.info.limit, Shadow: tb.info.shadow,
		Series: make([]Point, SeriesPoints),
	}
	ns := now.UnixNano()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	rr.Decisions, rr.Denied = tb.decided, tb.denied
	last := ns / int64(SeriesStep)
	for i := range SeriesPoints {
		step := last - SeriesPoints + 1 + int64(i)
		p := Point{At: time.Unix(0, step*int64(SeriesStep)).UTC()}
		if b := tb.series[uint64(step)%SeriesPoints]; b.step == step {
			p.Decisions, p.Denied = b.decisions, b.denials
		}
		rr.Series[i] = p
	}
	age := float64(ns - tb.landmark)
	decay := [2]float64{math.Exp(-age / float64(ShortWindow)), math.Exp(-age / float64(LongWindow))}
	rr.Keys = make([]KeyReport, 0, len(tb.heap))
	for _, i := range tb.heap {
		c := &tb.counters[i]
		k := KeyReport{
			Truncated: c.truncated,
			FirstSeen: time.Unix(0, c.first).UTC(), LastSeen: time.Unix(0, c.last).UTC(),
			Denied:     counts(c.denied, decay, c.deniedTotal),
			DeniedCost: counts(c.deniedCost, decay, c.deniedCostTotal),
			Allowed:    counts(c.allowed, decay, c.allowedTotal),
		}
		if tb.mac != nil {
			k.Key = string(c.key[:c.keyLen])
		} else {
			k.Key = Printable(c.key[:c.keyLen], c.truncated)
		}
		rr.Keys = append(rr.Keys, k)
	}
	return rr
}

func counts(v, decay [2]float64, total int64) Counts {
	return Counts{M1: round(v[0] * decay[0]), M15: round(v[1] * decay[1]), Total: total}
}

// round keeps a decayed count's first decimal.
func round(x float64) float64 { return math.Round(x*10) / 10 }

// finish fills in the shares, keeps each rule's k heaviest keys by q and
// orders the rules, busiest first.
func finish(r *Report, q Query, maxK int) {
	k := min(cmp.Or(q.K, DefaultK), maxK)
	rank := ranking(q)
	for i := range r.Rules {
		rr := &r.Rules[i]
		keys := rr.Keys[:0]
		for _, kr := range rr.Keys {
			if rank(kr) >= 0.05 {
				kr.AllowedShare = shares(kr)
				keys = append(keys, kr)
			}
		}
		slices.SortFunc(keys, func(a, b KeyReport) int {
			return cmp.Or(cmp.Compare(rank(b), rank(a)), cmp.Compare(b.Denied.Total, a.Denied.Total), strings.Compare(a.Key, b.Key))
		})
		rr.Keys = keys[:min(k, len(keys))]
	}
	slices.SortFunc(r.Rules, func(a, b RuleReport) int {
		return cmp.Or(cmp.Compare(recentDenials(b), recentDenials(a)), cmp.Compare(b.Denied, a.Denied),
			strings.Compare(a.Domain, b.Domain), strings.Compare(a.Rule, b.Rule), strings.Compare(a.ID, b.ID))
	})
}

// ranking is the value q ranks keys by.
func ranking(q Query) func(KeyReport) float64 {
	long := q.Window == "15m"
	return func(k KeyReport) float64 {
		c := k.Denied
		if q.By == "cost" {
			c = k.DeniedCost
		}
		if long {
			return c.M15
		}
		return c.M1
	}
}

func shares(k KeyReport) Shares {
	share := func(a, d float64) float64 {
		if a+d == 0 {
			return 0
		}
		return math.Round(a/(a+d)*1000) / 1000
	}
	return Shares{
		M1:    share(k.Allowed.M1, k.Denied.M1),
		M15:   share(k.Allowed.M15, k.Denied.M15),
		Total: share(float64(k.Allowed.Total), float64(k.Denied.Total)),
	}
}

func recentDenials(r RuleReport) int64 {
	var n int64
	for _, p := range r.Series {
		n += p.Denied
	}
	return n
}

// Merge adds up the reports of several replicas, each already cut by q,
// keeping each rule's k heaviest keys of the sum. A key cut from one
// replica's report is missing from its sum: ask each for more keys than
// are shown. maxK bounds q.K as Config.Keys does.
func Merge(q Query, maxK int, reports ...Report) Report {
	out := Report{Rules: []RuleReport{}}
	type ruleID struct{ kind, domain, rule, id string }
	rules := map[ruleID]int{}
	for _, r := range reports {
		if r.Now.After(out.Now) {
			out.Now = r.Now
		}
		out.Hashed = out.Hashed || r.Hashed
		out.Replicas += r.Replicas
		out.UntrackedDecisions += r.UntrackedDecisions
		for _, rr := range r.Rules {
			id := ruleID{rr.Kind, rr.Domain, rr.Rule, rr.ID}
			i, ok := rules[id]
			if !ok {
				rules[id] = len(out.Rules)
				rr.Series = slices.Clone(rr.Series)
				rr.Keys = slices.Clone(rr.Keys)
				out.Rules = append(out.Rules, rr)
				continue
			}
			mergeRule(&out.Rules[i], rr)
		}
	}
	finish(&out, q, maxK)
	return out
}

func mergeRule(dst *RuleReport, src RuleReport) {
	dst.Decisions += src.Decisions
	dst.Denied += src.Denied
	at := map[int64]int{}
	for i, p := range dst.Series {
		at[p.At.UnixNano()] = i
	}
	for _, p := range src.Series {
		if i, ok := at[p.At.UnixNano()]; ok {
			dst.Series[i].Decisions += p.Decisions
			dst.Series[i].Denied += p.Denied
		}
	}
	byKey := map[string]int{}
	for i, k := range dst.Keys {
		byKey[k.Key] = i
	}
	for _, k := range src.Keys {
		i, ok := byKey[k.Key]
		if !ok {
			byKey[k.Key] = len(dst.Keys)
			dst.Keys = append(dst.Keys, k)
			continue
		}
		d := &dst.Keys[i]
		d.Truncated = d.Truncated || k.Truncated
		d.Denied = addCounts(d.Denied, k.Denied)
		d.DeniedCost = addCounts(d.DeniedCost, k.DeniedCost)
		d.Allowed = addCounts(d.Allowed, k.Allowed)
		if k.FirstSeen.Before(d.FirstSeen) {
			d.FirstSeen = k.FirstSeen
		}
		if k.LastSeen.After(d.LastSeen) {
			d.LastSeen = k.LastSeen
		}
	}
}

func addCounts(a, b Counts) Counts {
	return Counts{M1: round(a.M1 + b.M1), M15: round(a.M15 + b.M15), Total: a.Total + b.Total}
}

// Printable is b as text safe to show anywhere: a backslash doubled,
// bytes that are not UTF-8 as \xNN, control and format characters as
// \u{NNNN}; a truncated key ends with "…".
func Printable(b []byte, truncated bool) string {
	if truncated {
		for p := len(b) - 1; p >= 0 && p >= len(b)-utf8.UTFMax; p-- {
			if utf8.RuneStart(b[p]) {
				if !utf8.FullRune(b[p:]) {
					b = b[:p]
				}
				break
			}
		}
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r == '\\':
			sb.WriteString(`\\`)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&sb, `\u{%04x}`, r)
		default:
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	if truncated {
		sb.WriteString("…")
	}
	return sb.String()
}
