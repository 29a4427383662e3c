package main

import (
	"context"

	"google.golang.org/grpc"

	"github.com/floodgate/floodgate/internal/giveback"
)

// Who may give budget back (Reset, refunds, Envoy's negative hits) is one
// rule, internal/giveback's. Here each port gets its part of it: on a port
// bound beyond loopback ("0.0.0.0:8081", ":8080", a pod's address) of a
// server without --auth-token-file (and, on gRPC, without client
// certificates), nothing tells an operator from anyone who reaches the
// port, so the port's calls carry a refusal, and every give-back there is
// refused (PermissionDenied naming the fix; on Envoy's API, decided as 0
// hits): giveback.PortRefusal says why. The server says so once at start.
// docs/security.md ("Giving budget back") tells it.

// refuseGiveBacks is a unary interceptor that puts the port's refusal
// (reason) into every call's context, for the give-back rule.
func refuseGiveBacks(reason string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		return next(giveback.WithRefusal(ctx, reason), req)
	}
}
