package server

import (
	"cmp"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Defaults of GRPCLimitOptions and the keepalive policy it sets.
const (
	// DefaultMaxConcurrentStreams bounds the calls in flight on one
	// connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). Envoy multiplexes
	// a worker's rate-limit calls on one connection, so this is generous.
	// A client past it queues, it is not refused.
	DefaultMaxConcurrentStreams = 1024

	// keepaliveMinTime is the shortest interval between client pings the
	// server accepts (the enforcement policy). Clients pinging more often
	// get GOAWAY "too_many_pings". Pings are allowed on connections with no
	// call in flight too, since Envoy and grpc-go clients keep idle
	// connections warm that way.
	keepaliveMinTime = 10 * time.Second
	// keepaliveMaxConnectionIdle closes (with GOAWAY, which clients follow
	// by reconnecting when needed) a connection that had no call for this
	// long, so connections from clients that went away do not pile up.
	keepaliveMaxConnectionIdle = 5 * time.Minute
	// keepaliveTime is how long a connection may be silent before the
	// server pings the client to check it is still there.
	keepaliveTime = time.Minute
	// keepaliveTimeout is how long the server waits for that ping's answer
	// before closing the connection.
	keepaliveTimeout = 20 * time.Second
	// handshakeTimeout bounds the connection setup (TCP accepted to the
	// end of the TLS and HTTP/2 handshakes), so a client that connects and
	// says nothing cannot hold a connection for long.
	handshakeTimeout = 10 * time.Second
)

// GRPCLimitOptions are the server options that bound what one client can
// hold: maxConcurrentStreams calls in flight per connection (0 means
// DefaultMaxConcurrentStreams), request messages of at most maxRecvMsg
// bytes (0 means DefaultMaxRecvMsgBytes; larger ones are refused with
// codes.ResourceExhausted), the keepalive enforcement policy (MinTime
// keepaliveMinTime, PermitWithoutStream true), the server's keepalive
// parameters (keepaliveMaxConnectionIdle, keepaliveTime, keepaliveTimeout;
// no maximum connection age) and handshakeTimeout.
//
// Pass them in GRPCSettings.ServerOptions: they come after NewGRPCServer's
// own options and so override its MaxRecvMsgSize.
func GRPCLimitOptions(maxConcurrentStreams uint32, maxRecvMsg int) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(cmp.Or(maxConcurrentStreams, DefaultMaxConcurrentStreams)),
		grpc.MaxRecvMsgSize(cmp.Or(max(maxRecvMsg, 0), DefaultMaxRecvMsgBytes)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             keepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: keepaliveMaxConnectionIdle,
			Time:              keepaliveTime,
			Timeout:           keepaliveTimeout,
		}),
		grpc.ConnectionTimeout(handshakeTimeout),
	}
}
