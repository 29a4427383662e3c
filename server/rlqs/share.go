package rlqs

import (
	"math"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// Defaults of ShareParams.
const (
	// DefaultFloor is the part of a budget split evenly among its
	// reporters whatever their demand, so a new instance is never starved.
	DefaultFloor = 0.1
	// DefaultCap bounds a share at this many times its reporter's demand
	// (never below the floor), so an idle instance hoards nothing.
	DefaultCap = 2.0
)

// ShareParams shape the shares a budget is split into (ShareParams.Share).
type ShareParams struct {
	// Floor in [0, 1): see DefaultFloor. Cap >= 1: see DefaultCap.
	Floor, Cap float64
}

// Share is one reporter's part of a budget of requests per period, given
// the totals of every live reporter (its own report included) and its own
// demand, both in thousandths of a request per second:
//
//	floor = budget × Floor / n
//	share = floor + budget × (1 − Floor) × own / total
//	share = min(share, max(floor, own × period × Cap))
//
// rounded down, and at least 1 when budget ≥ n (so every reporter can let
// a request through and be measured). Summed over reporters whose reports
// agree, the shares never exceed the budget (but for that minimum of 1).
// When no reporter demands anything, the budget is split evenly.
func (p ShareParams) Share(budget int64, period time.Duration, total store.DemandTotal, own int64) int64 {
	if budget <= 0 {
		return 0
	}
	n := max(total.Reporters, 1)
	var share float64
	if total.MilliRPS <= 0 || own < 0 {
		share = float64(budget) / float64(n)
	} else {
		own = min(own, total.MilliRPS)
		floor := float64(budget) * p.Floor / float64(n)
		share = floor + float64(budget)*(1-p.Floor)*float64(own)/float64(total.MilliRPS)
		limit := float64(own) / 1000 * period.Seconds() * p.Cap
		share = min(share, max(floor, limit))
	}
	s := int64(math.Floor(share))
	if s < 1 && budget >= n {
		s = 1
	}
	return min(s, budget)
}

// timeUnits are the periods Envoy's requests_per_time_unit can say.
var timeUnits = map[time.Duration]typev3.RateLimitUnit{
	time.Second:    typev3.RateLimitUnit_SECOND,
	time.Minute:    typev3.RateLimitUnit_MINUTE,
	time.Hour:      typev3.RateLimitUnit_HOUR,
	24 * time.Hour: typev3.RateLimitUnit_DAY,
}

// Strategy is the rate_limit_strategy that admits share requests per
// rate.Period at one instance:
//
//   - share 0: blanket_rule DENY_ALL;
//   - a bucket's rate (algorithms.Facts.Bucket, not one that waits):
//     token_bucket with tokens_per_fill share every period and max_tokens
//     the burst scaled by share / requests;
//   - a period of a second, minute, hour or day: requests_per_time_unit;
//   - any other period: token_bucket with max_tokens = tokens_per_fill =
//     share and fill_interval the period.
func Strategy(rate algorithms.Limit, share int64) *typev3.RateLimitStrategy {
	if share <= 0 {
		return Blanket(typev3.RateLimitStrategy_DENY_ALL)
	}
	// A bucket hands its burst out with the share; one that waits (a
	// queue) cannot queue at Envoy, where it spaces its starts: no burst.
	f := rate.Algorithm.Facts()
	bucket := f.Bucket && !f.Waits
	if bucket || timeUnits[rate.Period] == typev3.RateLimitUnit_UNKNOWN {
		burst := share
		if bucket && rate.Burst > 0 && rate.Requests > 0 {
			burst = max(1, int64(float64(rate.Burst)*float64(share)/float64(rate.Requests)))
		}
		return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
			MaxTokens:     uint32(min(burst, math.MaxUint32)),
			TokensPerFill: wrapperspb.UInt32(uint32(min(share, math.MaxUint32))),
			FillInterval:  durationpb.New(rate.Period),
		}}}
	}
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_RequestsPerTimeUnit_{
		RequestsPerTimeUnit: &typev3.RateLimitStrategy_RequestsPerTimeUnit{
			RequestsPerTimeUnit: uint64(share),
			TimeUnit:            timeUnits[rate.Period],
		},
	}}
}

// Blanket is a blanket_rule strategy.
func Blanket(r typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}
}
