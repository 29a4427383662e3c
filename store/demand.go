package store

import (
	"context"
	"time"
)

// DemandReport is one reporter's recent demand on one shared budget, for
// the Rate Limit Quota Service: each Envoy instance reporting a bucket is
// a reporter, and the budget is split among the live reporters of a key in
// proportion to their demand.
type DemandReport struct {
	// Key names the shared budget (opaque bytes chosen by the server).
	Key string
	// Reporter is unique across every floodgate replica sharing the
	// store (a replica id and a stream number).
	Reporter string
	// MilliRPS is the reporter's demand in thousandths of a request per
	// second (requests allowed plus denied over the time they took).
	MilliRPS int64
	// TTL is how long the report counts unless renewed or forgotten; it
	// must be positive.
	TTL time.Duration
}

// DemandTotal is what the live reports of one key add up to.
type DemandTotal struct {
	// Reporters counts the live reporters of the key, the new one included.
	Reporters int64
	// MilliRPS is their summed demand.
	MilliRPS int64
}

// DemandStore aggregates demand across floodgate replicas. Its methods may
// be called concurrently.
type DemandStore interface {
	// ReportDemand records every report (replacing the reporter's previous
	// one on the same key), drops the reports past their TTL, and writes the
	// key's totals after reports[i] to out[i] (len(out) == len(reports)).
	// Each report is atomic; reports of one call need not be atomic
	// together. now is the time of the reports.
	ReportDemand(ctx context.Context, now time.Time, reports []DemandReport, out []DemandTotal) error
	// ForgetDemand removes reporter's report on key (its stream ended).
	ForgetDemand(ctx context.Context, key, reporter string) error
}
