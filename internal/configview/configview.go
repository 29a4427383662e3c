// Package configview is the JSON view of the rules in force: each rule
// with where it was defined, and when the rules were loaded. It is the body
// of the admin endpoint GET /debug/config and of `floodgate config explain
// --json`, so a rule reads the same in both.
package configview

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/rules"
)

// SourceView is where a rule was defined: a file position, or an xDS
// resource and its version (rules.Source, whose JSON names these are).
type SourceView = rules.Source

// RateView is how a limit counts. Period is a Go duration ("1m0s"), or a
// calendar period as the config writes it ("calendar_month") with its
// TimeZone.
type RateView struct {
	Algorithm string `json:"algorithm,omitempty"`
	Requests  int64  `json:"requests"`
	Period    string `json:"period,omitempty"`
	TimeZone  string `json:"time_zone,omitempty"`
	Burst     int64  `json:"burst,omitempty"`
	// WarnAt is the warning threshold (warn_at) as written, "800" or
	// "80%"; WarnAtUnits is it in units of the capacity. Both empty when
	// the limit has none.
	WarnAt      string `json:"warn_at,omitempty"`
	WarnAtUnits int64  `json:"warn_at_units,omitempty"`
}

// RuleView is one limit of a domain's descriptors.
type RuleView struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	// Path is the rule's descriptors, "key=value/key2" (rules.FormatPath).
	Path   string     `json:"path"`
	Source SourceView `json:"source"`
	RateView
	Unlimited bool `json:"unlimited,omitempty"`
	DenyAll   bool `json:"deny_all,omitempty"`
	// FailureMode is "open", "closed", "local" or "default" (the server's
	// --failure-mode).
	FailureMode    string   `json:"failure_mode"`
	ShadowMode     bool     `json:"shadow_mode"`
	DetailedMetric bool     `json:"detailed_metric,omitempty"`
	Replaces       []string `json:"replaces,omitempty"`
}

// NewRuleView is the view of l.
func NewRuleView(l *rules.Limit) RuleView {
	v := RuleView{
		Name: l.Name, ID: l.ID, Path: rules.FormatPath(l.Path()), Source: l.Source(),
		Unlimited: l.Unlimited, DenyAll: l.DenyAll,
		FailureMode: l.FailureMode.String(), ShadowMode: l.ShadowMode, DetailedMetric: l.DetailedMetric,
		Replaces: l.Replaces,
	}
	if !l.Unlimited {
		v.RateView = NewRateView(l.Rate)
		v.WarnAt, v.WarnAtUnits = l.Warn.String(), l.Warn.At(l.Rate.Capacity())
	}
	return v
}

// NewRateView is the view of r.
func NewRateView(r algorithms.Limit) RateView {
	v := RateView{Algorithm: r.Algorithm.String(), Requests: r.Requests, Period: r.Period.String(), Burst: r.Burst}
	if r.Calendar != algorithms.NoCalendar {
		v.Period, v.TimeZone = "calendar_"+r.Calendar.String(), r.Location.String() // a nil Location is UTC
	}
	return v
}

// Text is how the rate reads: "100 per 1m0s, token_bucket, burst 10", or
// for a calendar period "10000 per calendar_month in Asia/Jakarta,
// fixed_window".
func (r RateView) Text() string {
	s := fmt.Sprintf("%d per %s, %s", r.Requests, r.Period, r.Algorithm)
	if r.TimeZone != "" {
		s = fmt.Sprintf("%d per %s in %s, %s", r.Requests, r.Period, r.TimeZone, r.Algorithm)
	}
	if r.Burst > 0 {
		s += fmt.Sprintf(", burst %d", r.Burst)
	}
	return s
}

// QuotaBucketView is one quota_buckets entry.
type QuotaBucketView struct {
	Name     string            `json:"name"`
	ID       string            `json:"id"`
	BucketID map[string]string `json:"bucket_id"`
	Action   string            `json:"action"`
	Source   SourceView        `json:"source"`
	// Rate is set for the rate_limit action.
	Rate *RateView `json:"rate,omitempty"`
}

// NewQuotaBucketView is the view of q.
func NewQuotaBucketView(q *rules.QuotaBucket) QuotaBucketView {
	v := QuotaBucketView{Name: q.Name, ID: q.ID, BucketID: q.Keys(), Action: q.Action.String(), Source: q.Source}
	if q.Limit != nil {
		r := NewRateView(q.Limit.Rate)
		v.Rate = &r
	}
	return v
}

// DomainView is one domain's rules and quota buckets.
type DomainView struct {
	Domain         string            `json:"domain"`
	Rules          []RuleView        `json:"rules"`
	QuotaBuckets   []QuotaBucketView `json:"quota_buckets,omitempty"`
	QuotaUnmatched string            `json:"quota_unmatched"`
}

// PolicyView is one named policy of the Check API.
type PolicyView struct {
	Name string `json:"name"`
	RateView
	FailureMode string     `json:"failure_mode"`
	ShadowMode  bool       `json:"shadow_mode"`
	Source      SourceView `json:"source"`
}

// ConfigView is the whole of GET /debug/config.
type ConfigView struct {
	// Loaded is false when the server runs without rules (no --config).
	Loaded bool `json:"loaded"`
	// LoadedAt is when the rules were read and validated (RFC 3339).
	LoadedAt *time.Time   `json:"loaded_at,omitempty"`
	Digest   string       `json:"digest,omitempty"`
	Files    []string     `json:"files"`
	Domains  []DomainView `json:"domains"`
	Policies []PolicyView `json:"policies"`
}

// New is the view of c (nil: no rules). Rules are listed in
// file order within each domain, domains and policies by name.
func New(c *rules.Set) ConfigView {
	v := ConfigView{Files: []string{}, Domains: []DomainView{}, Policies: []PolicyView{}}
	if c == nil {
		return v
	}
	at := c.LoadedAt()
	v.Loaded, v.LoadedAt, v.Digest, v.Files = true, &at, c.Digest(), c.Files()
	byDomain := map[string][]*rules.Limit{}
	for _, l := range c.Limits() {
		byDomain[l.Domain] = append(byDomain[l.Domain], l)
	}
	for _, d := range c.Domains() {
		ls := byDomain[d]
		slices.SortStableFunc(ls, func(a, b *rules.Limit) int { // by file, line and column, then xDS resource
			x, y := a.Source(), b.Source()
			return cmp.Or(strings.Compare(x.File, y.File), cmp.Compare(x.Line, y.Line), cmp.Compare(x.Column, y.Column),
				strings.Compare(x.XDSResource, y.XDSResource))
		})
		dv := DomainView{Domain: d, Rules: make([]RuleView, 0, len(ls)), QuotaUnmatched: c.QuotaUnmatched(d).String()}
		for _, l := range ls {
			dv.Rules = append(dv.Rules, NewRuleView(l))
		}
		for _, q := range c.QuotaBuckets(d) {
			dv.QuotaBuckets = append(dv.QuotaBuckets, NewQuotaBucketView(q))
		}
		v.Domains = append(v.Domains, dv)
	}
	for _, p := range c.Policies() {
		pv := PolicyView{
			Name:        p.Name,
			RateView:    NewRateView(p.Rate),
			FailureMode: p.FailureMode.String(), ShadowMode: p.ShadowMode,
			Source: c.PolicySource(p.Name),
		}
		pv.WarnAt, pv.WarnAtUnits = p.Warn.String(), p.Warn.At(p.Rate.Capacity())
		v.Policies = append(v.Policies, pv)
	}
	return v
}
