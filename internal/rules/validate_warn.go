package rules

import (
	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/softlimit"
)

// warnAt checks a limit's warn_at, a count of units ("800") or a whole
// percentage of the limit's capacity ("80%"), against the limit's rate r
// (already valid), and returns it; ok is false after an error, reported at
// the value. what names the limit in the message ("" for a rate_limit,
// whose position says it).
func (p *parser) warnAt(v value[string], what string, r algorithms.Limit) (softlimit.Threshold, bool) {
	if !v.given() {
		return softlimit.Threshold{}, true
	}
	if !v.ok {
		return softlimit.Threshold{}, false // reported by the decoder
	}
	prefix := "warn_at"
	if what != "" {
		prefix = what + ": warn_at"
	}
	t, err := softlimit.Parse(v.v)
	switch {
	case err != nil:
	case t.Count > r.Capacity():
		p.errorf(v.at, "%s %d is above the limit's capacity of %d (%s), so it would never warn", prefix, t.Count, r.Capacity(), capacityName(r))
		return softlimit.Threshold{}, false
	default:
		err = t.Validate(r.Capacity())
	}
	if err != nil {
		p.errorf(v.at, "%s %v", prefix, err)
		return softlimit.Threshold{}, false
	}
	return t, true
}

// capacityName says which setting gives r's capacity.
func capacityName(r algorithms.Limit) string {
	if r.Burst > 0 && r.Algorithm.Facts().Burst != "" {
		return "its burst"
	}
	return "its requests per period"
}
