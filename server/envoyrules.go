package server

import (
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/ratelimitheader"
	"github.com/floodgate/floodgate/internal/rules"
)

// limitInfo is what answering and counting a limit needs that depends on
// the limit alone, built once per limit (and config) instead of once per
// request: its header policy, its current_limit and its metrics series.
type limitInfo struct {
	header ratelimitheader.Policy
	// current_limit: requests per unit, unit and multiplier (0 for none).
	perUnit uint32
	unit    rlsv3.RateLimitResponse_RateLimit_Unit
	mult    uint32
	series  observability.RuleSeries
	warnAt  int64 // the warning threshold in units; 0 for none
}

// newLimitInfo builds l's limitInfo: its header policy is l as a quota
// policy (see internal/ratelimitheader for how a bucket maps to q and w).
func newLimitInfo(l *rules.Limit) *limitInfo {
	h := ratelimitheader.DenyAll(l.Name, l.Rate.Period)
	if !l.DenyAll {
		h = ratelimitheader.Of(l.Name, l.Rate)
		h.WarnAt = l.Warn.At(l.Rate.Capacity())
	}
	info := &limitInfo{header: ratelimitheader.Prepare(h), warnAt: h.WarnAt}
	info.perUnit, info.unit, info.mult = currentLimitOf(l)
	return info
}

// limitCache holds the limitInfo of the limits of one config, built on
// first use. A reload starts a new cache: Limits are never shared between
// configs, and the old cache goes with the old rules.
type limitCache struct {
	cfg *rules.Set
	m   sync.Map // *rules.Limit -> *limitInfo
}

// info returns l's limitInfo; l must belong to lc's rules.
func (lc *limitCache) info(l *rules.Limit) *limitInfo {
	if v, ok := lc.m.Load(l); ok {
		return v.(*limitInfo)
	}
	v, _ := lc.m.LoadOrStore(l, newLimitInfo(l))
	return v.(*limitInfo)
}

// unitsByLength are Envoy's units from the longest, for currentLimitOf.
var unitsByLength = [...]rlsv3.RateLimitResponse_RateLimit_Unit{
	rlsv3.RateLimitResponse_RateLimit_YEAR, rlsv3.RateLimitResponse_RateLimit_MONTH, rlsv3.RateLimitResponse_RateLimit_WEEK,
	rlsv3.RateLimitResponse_RateLimit_DAY, rlsv3.RateLimitResponse_RateLimit_HOUR, rlsv3.RateLimitResponse_RateLimit_MINUTE,
	rlsv3.RateLimitResponse_RateLimit_SECOND,
}

// calendarUnits are Envoy's units of the calendar periods.
var calendarUnits = map[algorithms.Calendar]rlsv3.RateLimitResponse_RateLimit_Unit{
	algorithms.Day: rlsv3.RateLimitResponse_RateLimit_DAY, algorithms.Week: rlsv3.RateLimitResponse_RateLimit_WEEK,
	algorithms.Month: rlsv3.RateLimitResponse_RateLimit_MONTH, algorithms.Year: rlsv3.RateLimitResponse_RateLimit_YEAR,
}

// currentLimitOf describes l in Envoy's terms: requests per unit, with a
// unit multiplier (0 for none) when the period is a multiple of a unit
// other than the unit itself; unit UNKNOWN when no unit divides it.
func currentLimitOf(l *rules.Limit) (perUnit uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, mult uint32) {
	if !l.DenyAll {
		perUnit = uint32(min(max(l.Rate.Capacity(), 0), 1<<32-1))
	}
	if u, ok := calendarUnits[l.Rate.Calendar]; ok {
		return perUnit, u, 0
	}
	p := l.Rate.Period
	for _, u := range unitsByLength {
		ud, _ := unitPeriod(u)
		if p > 0 && p%ud == 0 {
			if m := p / ud; m != 1 {
				mult = uint32(min(m, 1<<32-1))
			}
			return perUnit, u, mult
		}
	}
	return perUnit, rlsv3.RateLimitResponse_RateLimit_UNKNOWN, 0
}
