package server

import (
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestRefHeaders: the reference's three headers, for the status it picks.
func TestRefHeaders(t *testing.T) {
	h := ReferenceHeaders{"L", "R", "S"}
	st := func(code rlsv3.RateLimitResponse_Code, rpu uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, remaining uint32) *rlsv3.RateLimitResponse_DescriptorStatus {
		s := &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, LimitRemaining: remaining}
		if rpu > 0 {
			s.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: rpu, Unit: unit}
		}
		return s
	}
	const ok, over = rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	const sec, min, hour = rlsv3.RateLimitResponse_RateLimit_SECOND, rlsv3.RateLimitResponse_RateLimit_MINUTE, rlsv3.RateLimitResponse_RateLimit_HOUR
	now := time.Unix(277778*3600+17, 0) // 17 s past an hour (and a minute)
	tests := []struct {
		name     string
		statuses []*rlsv3.RateLimitResponse_DescriptorStatus
		want     string
		quota    []bool // quota-mode descriptors
	}{
		{"none", nil, "", nil},
		{"no limit", []*rlsv3.RateLimitResponse_DescriptorStatus{st(ok, 0, sec, 0)}, "", nil},
		{"unlimited", []*rlsv3.RateLimitResponse_DescriptorStatus{st(ok, 0, sec, 4294967295)}, "", nil},
		{"one", []*rlsv3.RateLimitResponse_DescriptorStatus{st(ok, 10, min, 7)}, "L=10 R=7 S=43", nil},
		{"least remaining", []*rlsv3.RateLimitResponse_DescriptorStatus{st(ok, 10, min, 7), st(ok, 5, sec, 2), st(ok, 100, hour, 3)}, "L=5 R=2 S=1", nil},
		{"first of equals", []*rlsv3.RateLimitResponse_DescriptorStatus{st(ok, 10, min, 2), st(ok, 5, sec, 2)}, "L=10 R=2 S=43", nil},
		{"over wins", []*rlsv3.RateLimitResponse_DescriptorStatus{st(ok, 10, min, 0), st(over, 5, hour, 0)}, "L=5 R=0 S=3583", nil},
		{"first over stays", []*rlsv3.RateLimitResponse_DescriptorStatus{st(over, 10, min, 0), st(ok, 5, sec, 0)}, "L=10 R=0 S=43", nil},
		{"over takes precedence whatever it reports", []*rlsv3.RateLimitResponse_DescriptorStatus{st(over, 10, min, 7), st(ok, 5, sec, 2)}, "L=10 R=7 S=43", nil},
		{"unknown code is not over", []*rlsv3.RateLimitResponse_DescriptorStatus{st(ok, 10, min, 1), st(rlsv3.RateLimitResponse_UNKNOWN, 5, sec, 3)}, "L=10 R=1 S=43", nil},
		{"last over wins", []*rlsv3.RateLimitResponse_DescriptorStatus{st(over, 10, min, 0), st(over, 5, sec, 0)}, "L=5 R=0 S=1", nil},
		{"an over quota takes no precedence", []*rlsv3.RateLimitResponse_DescriptorStatus{st(over, 10, min, 0), st(over, 5, sec, 0)}, "L=10 R=0 S=43", []bool{true, true}},
		{"an over quota is still least", []*rlsv3.RateLimitResponse_DescriptorStatus{st(ok, 10, min, 3), st(over, 5, sec, 0)}, "L=5 R=0 S=1", []bool{false, true}},
		{"a normal over beats a quota", []*rlsv3.RateLimitResponse_DescriptorStatus{st(ok, 10, min, 0), st(over, 5, sec, 7), st(over, 7, hour, 0)}, "L=5 R=7 S=1", []bool{false, false, true}},
		{"marks shorter than the statuses", []*rlsv3.RateLimitResponse_DescriptorStatus{st(over, 10, min, 0), st(over, 5, sec, 0)}, "L=5 R=0 S=1", []bool{true}},
	}
	for _, tc := range tests {
		var parts []string
		for _, hv := range h.headers(tc.statuses, tc.quota, now) {
			parts = append(parts, hv.Key+"="+hv.Value)
		}
		if got := strings.Join(parts, " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	for u, want := range map[rlsv3.RateLimitResponse_RateLimit_Unit]int64{sec: 1, min: 60, hour: 3600, rlsv3.RateLimitResponse_RateLimit_DAY: 86400,
		rlsv3.RateLimitResponse_RateLimit_WEEK: 604800, rlsv3.RateLimitResponse_RateLimit_MONTH: 2592000, rlsv3.RateLimitResponse_RateLimit_YEAR: 31536000,
		rlsv3.RateLimitResponse_RateLimit_UNKNOWN: 1} {
		// At the epoch, an edge of every unit: Reset is the unit's length.
		hs := h.headers([]*rlsv3.RateLimitResponse_DescriptorStatus{st(ok, 10, u, 1)}, nil, time.Unix(0, 0))
		if got := hs[2].Value; got != strconv.FormatInt(want, 10) {
			t.Errorf("unit %v: reset %s, want %d", u, got, want)
		}
	}
}
