package rules

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/algorithms"
)

// This file checks limits: what a policy and a rate_limit share (rate,
// failureMode, wholeRate), then each one's own spelling of requests and
// period (rateLimit, policy).

// rate checks a limit's algorithm and burst, whether a policy or a
// rate_limit gives them, and returns the rate to enforce: requests per
// period (read by the caller from its own spelling), counted with the
// limit's algorithm, else the file's default_algorithm, else fallback. A
// burst must be positive; a burst or a calendar period the algorithm does
// not take is reported at its field (algorithms.Limit.Validate). The rate as a whole
// is checked by wholeRate once the limit has no other error.
func (p *parser) rate(ld *limitDoc, fallback algorithms.Algorithm, requests int64, period time.Duration) algorithms.Limit {
	r := algorithms.Limit{Algorithm: fallback, Requests: requests, Period: period}
	if p.defaultAlg.Valid() {
		r.Algorithm = p.defaultAlg
	}
	if v := ld.algorithm; v.given() {
		r.Algorithm = algorithms.Unspecified
		if v.ok {
			a, err := algorithms.ParseAlgorithm(v.v)
			if err != nil {
				p.errorf(v.at, "algorithm: %v", err)
			}
			r.Algorithm = a
		}
	}
	p.calendar(ld, &r)
	if v := ld.burst; v.ok {
		if v.v <= 0 {
			p.errorf(v.at, "burst must be positive, got %d", v.v)
		} else {
			r.Burst = v.v
		}
	}
	// A field the algorithm does not take is reported where it is
	// written; the rest of Validate waits for wholeRate.
	if le, ok := errors.AsType[*algorithms.LimitError](r.Validate()); ok && len(le.Only) > 0 {
		if le.Field == "calendar" {
			p.errorf(ld.calendar.at, "period calendar_%s applies only to %s, not %v", r.Calendar, algorithms.Names(le.Only, "and", algorithms.Algorithm.String), r.Algorithm)
		} else {
			p.errorf(ld.burst.at, "%s", le.Message(algorithms.Algorithm.String))
		}
	}
	return r
}

// calendar sets r's calendar period and time zone from ld (period:
// calendar_month, time_zone: Asia/Jakarta), resolving the zone once, here.
func (p *parser) calendar(ld *limitDoc, r *algorithms.Limit) {
	if ld.calendar.ok {
		r.Calendar = ld.calendar.v
		if !ld.algorithm.given() && !p.defaultAlg.Valid() {
			// A policy's default may count in no windows, so no
			// calendar: count calendar quotas as the reference counts
			// unless told.
			r.Algorithm = algorithms.Compatible
		}
	}
	tz := ld.timeZone
	switch {
	case !tz.ok:
	case !ld.calendar.ok && !ld.calendar.given():
		p.errorf(tz.at, "time_zone applies only to a calendar period (period: calendar_day, calendar_week, calendar_month or calendar_year)")
	case ld.calendar.ok:
		loc, err := p.zones.Load(tz.v)
		if err != nil {
			p.errorf(tz.at, "time_zone: %v", err)
		}
		r.Location = loc
	}
}

// wholeRate checks r as a whole (algorithms.Limit.Validate: bounds and
// each algorithm's own), reporting at the limit's mapping. what names
// the limit in the message; "" for a rate_limit, whose position says it.
func (p *parser) wholeRate(at *yaml.Node, what string, r algorithms.Limit) bool {
	err := r.Validate()
	switch {
	case err == nil:
		return true
	case what == "":
		p.errorf(at, "%v", err)
	default:
		p.errorf(at, "%s: %v", what, err)
	}
	return false
}

// failureMode reads a limit's failure_mode (see FailureMode.UnmarshalText).
func (p *parser) failureMode(v value[string]) FailureMode {
	var m FailureMode
	if !v.ok {
		return FailureDefault
	}
	if err := m.UnmarshalText([]byte(v.v)); err != nil {
		p.errorf(v.at, "failure_mode %v", err)
	}
	return m
}

// rateLimit checks one rate_limit and builds its Limit (without the
// place-dependent fields: Domain, ID, path), or returns nil. The period is
// unit times unit_multiplier, or floodgate's period; requests_per_unit 0
// denies every matching request.
func (p *parser) rateLimit(rl *rateLimitDoc) *Limit {
	if rl == nil {
		return nil // not a mapping: reported
	}
	errsBefore := len(p.errs)
	l := &Limit{}
	if v := rl.name; v.ok && v.v != "" {
		l.Name, l.explicitName = v.v, true
		p.named[v.v] = true
	}
	p.replacesList(l, rl.replaces)
	l.ShadowMode = isTrue(rl.shadowMode)
	l.QuotaMode = isTrue(rl.quotaMode)
	l.FailureMode = p.failureMode(rl.failureMode)
	if isTrue(rl.unlimited) {
		l.Unlimited = true
		p.unlimited(rl)
		if rl.bad || len(p.errs) > errsBefore {
			return nil
		}
		return l
	}
	period := p.period(rl)
	requests := rl.requestsPerUnit
	switch {
	case !requests.given():
		p.errorf(rl.at, "rate_limit needs requests_per_unit (0 denies every matching request)")
	case requests.ok && requests.v < 0:
		p.errorf(requests.at, "requests_per_unit must not be negative, got %d", requests.v)
	}
	l.Rate = p.rate(&rl.limitDoc, algorithms.Compatible, requests.v, period)
	if rl.bad || len(p.errs) > errsBefore {
		return nil
	}
	if l.Rate.Requests == 0 {
		if rl.burst.given() {
			p.errorf(rl.burst.at, "burst does not apply when requests_per_unit is 0 (every matching request is denied)")
			return nil
		}
		if rl.warnAt.given() {
			p.errorf(rl.warnAt.at, "warn_at does not apply when requests_per_unit is 0 (every matching request is denied)")
			return nil
		}
		l.DenyAll = true
		return l
	}
	if !p.wholeRate(rl.at, "", l.Rate) {
		return nil
	}
	var ok bool
	if l.Warn, ok = p.warnAt(rl.warnAt, "", l.Rate); !ok {
		return nil
	}
	return l
}

// unlimited refuses the settings that an unlimited rate_limit ignores.
func (p *parser) unlimited(rl *rateLimitDoc) {
	for _, f := range []struct {
		key string
		at  *yaml.Node
	}{
		{"unit", rl.unit.at}, {"unit_multiplier", rl.unitMultiplier.at}, {"period", rl.period.at},
		{"requests_per_unit", rl.requestsPerUnit.at}, {"algorithm", rl.algorithm.at}, {"burst", rl.burst.at}, {"time_zone", rl.timeZone.at},
		{"failure_mode", rl.failureMode.at}, {"shadow_mode", rl.shadowMode.at}, {"warn_at", rl.warnAt.at},
	} {
		switch {
		case f.at == nil:
		case f.key == "unit":
			p.errorf(f.at, "should not specify rate limit unit when unlimited")
		default:
			p.errorf(f.at, "%s does not apply to an unlimited rate_limit", f.key)
		}
	}
}

// period is a rate_limit's period: its unit (see UnitPeriod) times
// unit_multiplier, or floodgate's period; 0 after an error.
func (p *parser) period(rl *rateLimitDoc) time.Duration {
	unit, mult := rl.unit, rl.unitMultiplier
	switch {
	case unit.given() && rl.period.given():
		p.errorf(rl.period.at, "give unit (with unit_multiplier) or period, not both")
	case unit.given():
		if !unit.ok {
			return 0
		}
		period, known := UnitPeriod(unit.v)
		if !known {
			p.errorf(unit.at, "invalid rate limit unit %q (want %s)", unit.v, unitList())
		}
		if !mult.ok {
			return period
		}
		switch m := mult.v; {
		case m <= 0:
			p.errorf(mult.at, "unit_multiplier must be positive, got %d", m)
		case period > 0 && m > int64(1<<62)/int64(period):
			p.errorf(mult.at, "unit_multiplier %d makes the period too long", m)
		default:
			return period * time.Duration(m)
		}
		return period
	case rl.period.given():
		if mult.given() {
			p.errorf(mult.at, "unit_multiplier goes with unit, not with period")
		}
		return rl.period.v
	default:
		p.errorf(rl.at, "rate_limit needs a unit (or period), or unlimited: true")
	}
	return 0
}

// replacesList checks a rate_limit's replaces entries into l.Replaces;
// whether each names a limit of the domain is checked once the whole
// file is read.
func (p *parser) replacesList(l *Limit, entries []replaceDoc) {
	for _, r := range entries {
		s := r.name
		switch {
		case !s.given():
			p.errorf(r.at, "a replaces entry needs a name")
		case !s.ok:
		case s.v == "":
			p.errorf(s.at, "should not have an empty replaces entry")
		case s.v == l.Name:
			p.errorf(s.at, "replaces should not contain the name of the same limit (%q)", s.v)
		default:
			l.Replaces = append(l.Replaces, s.v)
			p.replaces = append(p.replaces, replaceRef{name: s.v, at: s.at})
		}
	}
}

// policies checks the policies map: names present and unique, each
// policy valid.
func (p *parser) policies(n *yaml.Node) []policyAt {
	entries, _, ok := p.pairs(n, false, "policies must be a mapping of names to limits")
	if !ok {
		return nil
	}
	var out []policyAt
	seen := map[string]*yaml.Node{}
	for _, e := range entries {
		k := e.key
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			p.errorf(k, "a policy needs a non-empty name")
			continue
		}
		first := seen[k.Value]
		if first != nil {
			p.errorf(k, "duplicate policy %q (first at line %d)", k.Value, first.Line)
		} else {
			seen[k.Value] = k
		}
		if pol, ok := p.policy(k.Value, e.value); ok && first == nil { // a duplicate is checked too
			out = append(out, policyAt{p: pol, pos: posOf(k), src: p.sourceAt(posOf(k))})
		}
	}
	return out
}

// shorthands are the tier fields: requests per fixed period.
var shorthands = [...]struct {
	key    string
	period time.Duration
}{
	{"requests_per_second", time.Second},
	{"requests_per_min", time.Minute},
	{"requests_per_hour", time.Hour},
}

// policy checks one policy, the mapping n: requests with period, or one
// shorthand.
func (p *parser) policy(name string, n *yaml.Node) (Policy, bool) {
	what := fmt.Sprintf("policy %q", name)
	f, at, ok := p.fields(n, what, "algorithm", "requests", "period", "time_zone", "burst", "failure_mode", "shadow_mode",
		"requests_per_second", "requests_per_min", "requests_per_hour", "warn_at")
	if !ok {
		return Policy{}, false
	}
	errsBefore := len(p.errs)
	ld := p.limitDoc(f)
	var given []string
	var requests int64
	var period time.Duration
	if v := p.integer(f["requests"], "requests"); v.given() {
		given = append(given, "requests")
		requests = v.v
		if !ld.period.given() {
			p.errorf(v.at, "%s: requests needs a period", what)
		}
		period = ld.period.v
	} else if ld.period.given() {
		p.errorf(ld.period.at, "%s: period needs requests", what)
	}
	for _, s := range shorthands {
		if v := p.integer(f[s.key], s.key); v.given() {
			given = append(given, s.key)
			if v.ok {
				requests, period = v.v, s.period
			}
		}
	}
	switch {
	case len(given) == 0:
		p.errorf(at, "%s needs requests with period, or one of requests_per_second, requests_per_min, requests_per_hour", what)
	case len(given) > 1:
		p.errorf(at, "%s: give only one of %s", what, strings.Join(given, ", "))
	}
	// Policies serve our own API, so the default is algorithms.Default,
	// not the reference's algorithms.Compatible.
	pol := Policy{
		Name:        name,
		Rate:        p.rate(&ld, algorithms.Default, requests, period),
		FailureMode: p.failureMode(ld.failureMode),
		ShadowMode:  isTrue(ld.shadowMode),
	}
	if len(p.errs) > errsBefore || !p.wholeRate(at, what, pol.Rate) {
		return Policy{}, false
	}
	pol.Warn, ok = p.warnAt(ld.warnAt, what, pol.Rate)
	return pol, ok
}
