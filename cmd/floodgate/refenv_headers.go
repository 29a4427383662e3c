package main

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/server"
)

// interceptor adds the reference's three response headers to every
// ShouldRateLimit answer, as it picks them: the descriptor status with a
// limit and the least remaining, an over-limit one taking precedence over
// any earlier pick; Limit is its requests_per_unit, Remaining its
// limit_remaining, Reset the seconds to the end of its unit's
// epoch-aligned window by now. An over-limit status of a quota-mode
// descriptor (server.QuotaMarks) takes no precedence. No status with a
// limit: no headers.
func (h *refHeaderNames) interceptor(now func() time.Time) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if info.FullMethod != rlsv3.RateLimitService_ShouldRateLimit_FullMethodName {
			return handler(ctx, req)
		}
		ctx, marks := server.WithQuotaMarks(ctx)
		resp, err := handler(ctx, req)
		if err != nil {
			return resp, err
		}
		if r, ok := resp.(*rlsv3.RateLimitResponse); ok {
			r.ResponseHeadersToAdd = h.headers(r.GetStatuses(), marks.Quota, now())
		}
		return resp, err
	}
}

// headers are the reference's headers for statuses at now; quota[i]
// marks status i as a quota-mode descriptor's (nil: none is).
func (h *refHeaderNames) headers(statuses []*rlsv3.RateLimitResponse_DescriptorStatus, quota []bool, now time.Time) []*corev3.HeaderValue {
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
		{Key: h.limit, Value: strconv.FormatUint(uint64(pick.GetCurrentLimit().GetRequestsPerUnit()), 10)},
		{Key: h.remaining, Value: strconv.FormatUint(uint64(pick.GetLimitRemaining()), 10)},
		{Key: h.reset, Value: strconv.FormatInt(reset, 10)},
	}
}

// unknownFloodgateVars names the FLOODGATE_* variables of environ that no
// flag of fs reads (a typo, or a flag of another command), sorted.
func unknownFloodgateVars(environ []string, fs *pflag.FlagSet) []string {
	known := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix) && !known[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
