package server

import (
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/internal/rules"
)

// ReferenceHeaders are the names of the three response headers
// envoyproxy/ratelimit adds with LIMIT_RESPONSE_HEADERS_ENABLED (its
// LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and LIMIT_RESET_HEADER).
type ReferenceHeaders struct{ Limit, Remaining, Reset string }

// headers are the reference's three headers for statuses at now, as it
// picks them: the descriptor status with a limit and the least remaining,
// an over-limit one taking precedence over any earlier pick; Limit is its
// requests_per_unit, Remaining its limit_remaining, Reset the seconds to
// the end of its unit's epoch-aligned window by now. An over-limit status
// of a quota-mode descriptor (quota[i]) takes no precedence. No status
// with a limit: no headers.
func (h *ReferenceHeaders) headers(statuses []*rlsv3.RateLimitResponse_DescriptorStatus, quota []bool, now time.Time) []*corev3.HeaderValue {
	var pick *rlsv3.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for i, s := range statuses {
		if s.GetCurrentLimit() != nil && s.GetLimitRemaining() < least {
			pick, least = s, s.GetLimitRemaining()
		}
		if s.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT && (i >= len(quota) || !quota[i]) {
			pick, least = s, 0
		}
	}
	if pick == nil || pick.GetCurrentLimit() == nil {
		return nil
	}
	unit := int64(1) // an unknown unit counts as a second
	if p, ok := rules.UnitPeriod(pick.GetCurrentLimit().GetUnit().String()); ok {
		unit = int64(p / time.Second) // a month is 30 days, a year 365, as the reference counts them
	}
	reset := unit - now.Unix()%unit
	return []*corev3.HeaderValue{
		{Key: h.Limit, Value: strconv.FormatUint(uint64(pick.GetCurrentLimit().GetRequestsPerUnit()), 10)},
		{Key: h.Remaining, Value: strconv.FormatUint(uint64(pick.GetLimitRemaining()), 10)},
		{Key: h.Reset, Value: strconv.FormatInt(reset, 10)},
	}
}

// quotaMarks tells, for each of n statuses, whether it belongs to a
// quota-mode descriptor (one of its enforced limits is in quota mode,
// its own or the server's).
func quotaMarks(checks []envoyCheck, n int) []bool {
	marks := make([]bool, n)
	for i := range checks {
		if c := &checks[i]; c.quota && !c.limit.Unlimited && c.desc < n {
			marks[c.desc] = true
		}
	}
	return marks
}
