package observability_test

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// Test helpers copied from other packages' tests (the old server package
// shared them), until one package of test helpers holds them.

func inline(requests int64, period time.Duration, burst int64) *floodgatev1.CheckRequest_Limit {
	return &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: requests, Period: durationpb.New(period), Burst: burst}}
}
