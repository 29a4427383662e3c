package rules

import (
	"strings"
	"time"
)

// envoyUnits are envoyproxy/ratelimit's rate-limit units (the names of
// the proto enum envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit
// but UNKNOWN, lowercase), shortest first. Month and year are 30 and 365 days, as it counts them.
// This table is the one owner of these names and periods: the YAML rules
// and the Envoy API's per-request overrides both read it through
// UnitPeriod.
var envoyUnits = [...]struct {
	name   string
	period time.Duration
}{
	{"second", time.Second},
	{"minute", time.Minute},
	{"hour", time.Hour},
	{"day", 24 * time.Hour},
	{"week", 7 * 24 * time.Hour},
	{"month", 30 * 24 * time.Hour},
	{"year", 365 * 24 * time.Hour},
}

// UnitPeriod returns the period of one of envoyproxy/ratelimit's
// rate-limit units, named in any case: "second" in a YAML rule, or the
// proto enum's name ("SECOND", from RateLimitResponse_RateLimit_Unit's
// String method) for a request's own limit. ok is false for any other
// name, "unknown" included. It does not allocate.
func UnitPeriod(name string) (period time.Duration, ok bool) {
	for _, u := range envoyUnits {
		if strings.EqualFold(u.name, name) {
			return u.period, true
		}
	}
	return 0, false
}

// unitList is the units for an error message: "second, minute, ..., month
// or year".
func unitList() string {
	names := make([]string, len(envoyUnits))
	for i, u := range envoyUnits {
		names[i] = u.name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
