package server

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/ratelimitheader"
	"github.com/floodgate/floodgate/internal/softlimit"
)

// The soft limit: a limit's warning threshold (rules' warn_at, an inline
// limit's warn_at or warn_at_percent). An allowed answer whose usage has
// reached it carries a warning: CheckResponse.warning, the
// RateLimit-Warning header on the HTTP door and Envoy's answer, and the
// ratelimit-warning response metadata of the gRPC Check API.

// warningMD is the gRPC response metadata key of the warning: the lower
// case form of ratelimitheader.WarningName, with the same value.
const warningMD = "ratelimit-warning"

// inlineWarnAt is the warning threshold of the inline limit pl (rate l)
// in units of l's capacity: limit.warn_at, or limit.warn_at_percent of
// the capacity; 0 for none.
func inlineWarnAt(pl *floodgatev1.Limit, l algorithms.Limit) (int64, error) {
	t := softlimit.Threshold{Count: pl.GetWarnAt(), Percent: int64(pl.GetWarnAtPercent())}
	field := "limit.warn_at"
	switch {
	case t.Count != 0 && t.Percent != 0:
		return 0, invalidf(field, "give warn_at or warn_at_percent, not both")
	case t.Percent != 0:
		field = "limit.warn_at_percent"
	}
	if err := t.Validate(l.Capacity()); err != nil {
		return 0, invalidf(field, "%v", err)
	}
	return t.At(l.Capacity()), nil
}

// warned reports whether an answer carries the warning: answered allowed,
// known (not degraded), under a limit with a threshold (at units), and
// either the decision's usage reached it or shadow mode allowed a deny
// (over the limit is past any threshold).
func warned(allowed bool, d algorithms.Decision, degraded bool, at int64) bool {
	switch {
	case !allowed || degraded || at <= 0:
		return false
	case !d.Allowed:
		return true // shadow mode's allow
	}
	return softlimit.Reached(d.Limit, d.Remaining, at)
}

// sendWarning sets the gRPC response metadata ratelimit-warning listing
// the checks whose answers warn (as RateLimit-Warning); nothing when none
// does. Outside a gRPC call (the HTTP door calls the handlers directly)
// there is no header to set and nothing happens.
func sendWarning(ctx context.Context, checks []check, resps []*floodgatev1.CheckResponse) {
	var members []string
	for i, r := range resps {
		if r.GetWarning() {
			members = append(members, ratelimitheader.WarningMember(checks[i].rule, r.GetWarnAt()))
		}
	}
	if len(members) == 0 {
		return
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(warningMD, strings.Join(members, ", ")))
}
