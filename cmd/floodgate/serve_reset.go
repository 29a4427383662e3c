package main

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// Who may Reset. With --auth-token-file, an admin token (internal/auth).
// Without it, nothing tells an operator from anyone else who reaches the
// port, so Reset (forgetting a key's counts: the one call that frees a
// denied key early) is served only on a port bound to loopback, where
// only this host's processes reach it. On a port bound beyond loopback
// ("0.0.0.0:8081", ":8080", a pod's address) the API serves decisions
// only, and Reset answers PermissionDenied naming the fix; the server
// says so once at start. docs/httpapi.md ("Reset and tokens") tells it.

// resetRefusal is why Reset is refused on a port bound to addr (a
// --grpc-addr or --http-addr), or "" when it is served: with tokens, or
// on loopback.
func resetRefusal(addr string, tokens bool) string {
	if tokens || loopbackAddr(addr) {
		return ""
	}
	return "Reset needs an admin token: this port (" + addr + ") is bound beyond loopback and the server has no --auth-token-file; " +
		"start it with --auth-token-file (and call Reset with a token that has the admin role), or bind the port to 127.0.0.1"
}

// loopbackAddr reports whether the host of a listen address host:port is
// a loopback address or "localhost". An empty host (every address), an
// unspecified one and any other name are not.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refuseReset is a unary interceptor that answers Reset PermissionDenied
// with reason, and passes every other call on.
func refuseReset(reason string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if info.FullMethod == floodgatev1.RateLimiter_Reset_FullMethodName {
			return nil, status.Error(codes.PermissionDenied, reason)
		}
		return next(ctx, req)
	}
}
