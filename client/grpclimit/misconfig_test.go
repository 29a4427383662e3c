package grpclimit_test

import (
	"context"
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/client/grpclimit"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// TestInterceptorMissingToken: the same for the gRPC
// interceptors: Internal, logged once.
func TestInterceptorMissingToken(t *testing.T) {
	addr := floodgatetest.StartAuth(t, "s3cret")
	var logged floodgatetest.LogCounter
	hc := startProtected(t, floodgatetest.Dial(t, addr), grpclimit.Config{Limit: perMinute3, Logger: slog.New(&logged)})
	for i := range 4 {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Internal {
			t.Fatalf("call %d: got %v, want Internal", i+1, err)
		}
	}
	logged.WantLogged(t, 1, "Unauthenticated")
}
