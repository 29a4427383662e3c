package rules

import (
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/algorithms"
)

// The typed documents of a descriptor and of a limit, decoded before
// validation: every value keeps its node, so validation reports
// positions. A rate_limit whose decoding reported an error is marked bad:
// validation still checks what did decode (so a file's problems show at
// once), but builds nothing from it. Descriptor trees are decoded level by
// level as validation walks them (descriptorDoc.descriptors): a ban list
// of 200,000 rules never sits in memory twice, and the alias-cycle and
// depth guards follow the walk.

// limitDoc is what a policy and a rate_limit share: how to count, and
// what to do when the store cannot. The parser's rate checks it.
type limitDoc struct {
	algorithm   value[string]
	period      value[time.Duration] // not ok (v 0) for a calendar period
	calendar    value[algorithms.Calendar]
	timeZone    value[string]
	burst       value[int64]
	failureMode value[string]
	shadowMode  value[bool]
	warnAt      value[string] // warn_at, as written (validate_warn.go)
}

func (d *decoder) limitDoc(f map[string]*yaml.Node) limitDoc {
	ld := limitDoc{
		algorithm:   d.str(f["algorithm"]),
		timeZone:    d.str(f["time_zone"]),
		burst:       d.integer(f["burst"], "burst"),
		failureMode: d.str(f["failure_mode"]),
		shadowMode:  d.boolean(f["shadow_mode"], "shadow_mode"),
		warnAt:      d.str(f["warn_at"]),
	}
	ld.period, ld.calendar = d.period(f["period"])
	return ld
}

// calendarPrefix heads the period of a calendar limit: calendar_day,
// calendar_week, calendar_month, calendar_year.
const calendarPrefix = "calendar_"

// period reads a limit's period: a duration (decoder.duration), or a
// calendar period ("calendar_month"), which leaves the duration given but
// not ok.
func (d *decoder) period(n *yaml.Node) (value[time.Duration], value[algorithms.Calendar]) {
	c := value[algorithms.Calendar]{at: n}
	if m := d.visit(n); m != nil && m.Kind == yaml.ScalarNode && strings.HasPrefix(m.Value, calendarPrefix) {
		cal, err := algorithms.ParseCalendar(strings.TrimPrefix(m.Value, calendarPrefix))
		if err != nil {
			d.errorf(m, "period %q is not a calendar period (want calendar_day, calendar_week, calendar_month or calendar_year)", m.Value)
		} else {
			c.v, c.ok = cal, true
		}
		return value[time.Duration]{at: n}, c
	}
	return d.duration(n, "period"), value[algorithms.Calendar]{}
}

// descriptorDoc is one descriptor: a level of a domain's tree.
type descriptorDoc struct {
	at             *yaml.Node // the descriptor's mapping
	key, value     value[string]
	match          value[string]   // how value matches: "cidr", or absent (exact or wildcard)
	rateLimitAt    *yaml.Node      // rate_limit, or nil
	rateLimitsAt   *yaml.Node      // rate_limits, or nil
	rateLimits     []*rateLimitDoc // nil for an entry that is not a mapping
	notAList       bool            // rate_limits is not a list
	descriptors    *yaml.Node      // the nested list, or nil
	shadowMode     value[bool]
	detailedMetric value[bool]
	valueToMetric  value[bool]
	shareThreshold value[bool]
	quotaMode      value[bool]
	metadata       *yaml.Node    // free-form, returned to Envoy (metadata.go), or nil
	charge         value[string] // "after": charges its parent's limits as debt (charge.go)
}

var descriptorKeys = []string{
	"key", "value", "match", "rate_limit", "rate_limits", "descriptors", "shadow_mode",
	"detailed_metric", "value_to_metric", "share_threshold", "quota_mode", "metadata",
	"charge",
}

// descriptor decodes one descriptor, leaving its nested descriptors for
// the walk. metadata is free-form (see metadata.go).
func (d *decoder) descriptor(n *yaml.Node) (descriptorDoc, bool) {
	f, at, ok := d.fields(n, "a descriptor", descriptorKeys...)
	if !ok {
		return descriptorDoc{}, false
	}
	dd := descriptorDoc{
		at:             at,
		key:            d.str(f["key"]),
		value:          d.str(f["value"]),
		match:          d.str(f["match"]),
		rateLimitAt:    f["rate_limit"],
		rateLimitsAt:   f["rate_limits"],
		descriptors:    f["descriptors"],
		shadowMode:     d.boolean(f["shadow_mode"], "shadow_mode"),
		detailedMetric: d.boolean(f["detailed_metric"], "detailed_metric"),
		valueToMetric:  d.boolean(f["value_to_metric"], "value_to_metric"),
		shareThreshold: d.boolean(f["share_threshold"], "share_threshold"),
		quotaMode:      d.boolean(f["quota_mode"], "quota_mode"),
		metadata:       f["metadata"],
		charge:         d.str(f["charge"]),
	}
	switch {
	case dd.rateLimitAt != nil && dd.rateLimitsAt != nil:
		// Not read: validation refuses the pair.
	case dd.rateLimitAt != nil:
		dd.rateLimits = []*rateLimitDoc{d.rateLimit(dd.rateLimitAt)}
	case dd.rateLimitsAt != nil:
		items, ok := d.list(dd.rateLimitsAt, "rate_limits")
		dd.notAList = !ok
		for _, it := range items {
			dd.rateLimits = append(dd.rateLimits, d.rateLimit(it))
		}
	}
	return dd, true
}

// rateLimitDoc is one rate_limit object (envoyproxy/ratelimit's, plus
// floodgate's algorithm, burst, period and failure_mode).
type rateLimitDoc struct {
	at  *yaml.Node // the mapping
	bad bool       // decoding reported an error
	limitDoc
	unit            value[string]
	unitMultiplier  value[int64]
	requestsPerUnit value[int64]
	unlimited       value[bool]
	name            value[string]
	replacesAt      *yaml.Node // the replaces list, or nil
	replaces        []replaceDoc
	quotaMode       value[bool]
}

// replaceDoc is one entry of a replaces list.
type replaceDoc struct {
	at   *yaml.Node // the entry's mapping
	name value[string]
}

var rateLimitKeys = []string{
	"unit", "unit_multiplier", "requests_per_unit", "unlimited", "name", "replaces",
	"algorithm", "burst", "period", "time_zone", "failure_mode", "shadow_mode", "quota_mode",
	"warn_at",
}

// rateLimit decodes one rate_limit object; nil when it is not a mapping.
func (d *decoder) rateLimit(n *yaml.Node) *rateLimitDoc {
	f, at, ok := d.fields(n, "rate_limit", rateLimitKeys...)
	if !ok {
		return nil
	}
	errsBefore := len(d.errs)
	rl := &rateLimitDoc{
		at:              at,
		limitDoc:        d.limitDoc(f),
		unit:            d.str(f["unit"]),
		unitMultiplier:  d.integer(f["unit_multiplier"], "unit_multiplier"),
		requestsPerUnit: d.integer(f["requests_per_unit"], "requests_per_unit"),
		unlimited:       d.boolean(f["unlimited"], "unlimited"),
		name:            d.str(f["name"]),
		replacesAt:      f["replaces"],
		quotaMode:       d.boolean(f["quota_mode"], "quota_mode"),
	}
	if rl.replacesAt != nil {
		items, _ := d.list(rl.replacesAt, "replaces")
		for _, it := range items {
			if f, at, ok := d.fields(it, "a replaces entry", "name"); ok {
				rl.replaces = append(rl.replaces, replaceDoc{at: at, name: d.str(f["name"])})
			}
		}
	}
	rl.bad = len(d.errs) > errsBefore
	return rl
}
