package server

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/lenientcodec"
)

// DefaultMaxRecvMsgBytes bounds a request message.
const DefaultMaxRecvMsgBytes = 1 << 20

// GRPCSettings are the gRPC server's optional knobs. The zero value is
// usable.
type GRPCSettings struct {
	// Logger receives recovered panics, and request logs when it is
	// enabled at debug level.
	// nil means slog.Default().
	Logger *slog.Logger
	// ServerOptions are appended (TLS credentials, keepalive, limits;
	// GRPCLimitOptions' MaxRecvMsgSize overrides DefaultMaxRecvMsgBytes).
	ServerOptions []grpc.ServerOption
	// UnaryInterceptors run after recovery and logging, in order.
	UnaryInterceptors []grpc.UnaryServerInterceptor
	// StreamInterceptors run after recovery and logging, in order.
	StreamInterceptors []grpc.StreamServerInterceptor
	// Gate, when set, admits calls within its TransportLimits (and checks
	// tokens before a call's message is read, when it has Auth). Serve on
	// Gate.Listener to bound connections too. nil admits every call, with
	// grpc-go's own limits (16 MB of metadata, no deadline).
	Gate *Gate
	// Quota, when set, serves Envoy's Rate Limit Quota Service
	// (server/rlqs) on the same port; its stream is a streaming method
	// for the Gate (no unary deadline, counted against the stream caps).
	Quota rlqsv3.RateLimitQuotaServiceServer
	// TraceUnary and TraceStream, when set, make each call's server span
	// (internal/tracing's ServerInterceptors). They run first, so that the
	// span covers the whole call.
	TraceUnary  grpc.UnaryServerInterceptor
	TraceStream grpc.StreamServerInterceptor
}

// NewGRPCServer builds a gRPC server with recovery and request logging,
// grpc.health.v1 (returned so the caller can report store health) and
// reflection, and registers rl and, when not nil, envoy on it: both APIs
// share one port.
func NewGRPCServer(rl floodgatev1.RateLimiterServer, envoy rlsv3.RateLimitServiceServer, s GRPCSettings) (*grpc.Server, *health.Server) {
	log := cmp.Or(s.Logger, slog.Default())
	onPanic := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	reqLog := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		log.Log(ctx, slog.Level(lvl), msg, fields...)
	})
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(func(c codes.Code) logging.Level {
			if c == codes.Internal || c == codes.Unknown || c == codes.DataLoss {
				return logging.LevelError
			}
			return logging.LevelDebug
		}),
	}
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	if s.TraceUnary != nil {
		unary = append(unary, s.TraceUnary)
	}
	if s.TraceStream != nil {
		stream = append(stream, s.TraceStream)
	}
	unary = append(unary, recovery.UnaryServerInterceptor(onPanic))
	stream = append(stream, recovery.StreamServerInterceptor(onPanic))
	// Request logs are debug-level, and the logging interceptor builds its
	// fields on every call whatever the level: it is installed only when
	// debug logs are on. Internal errors are logged by toStatus regardless.
	if log.Enabled(context.Background(), slog.LevelDebug) {
		unary = append(unary, logging.UnaryServerInterceptor(reqLog, logOpts...))
		stream = append(stream, logging.StreamServerInterceptor(reqLog, logOpts...))
	}
	unary = append(unary, s.UnaryInterceptors...)
	stream = append(stream, s.StreamInterceptors...)

	opts := append([]grpc.ServerOption{
		// Keys and descriptor values are bytes: a request whose strings
		// are not UTF-8 is decided like any other instead of failing in
		// the codec, unseen (see lenientcodec).
		grpc.ForceServerCodecV2(lenientcodec.Codec{}),
		grpc.MaxRecvMsgSize(DefaultMaxRecvMsgBytes),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	}, s.ServerOptions...)
	if s.Gate != nil {
		opts = append(opts, s.Gate.ServerOptions()...)
	}
	srv := grpc.NewServer(opts...)
	floodgatev1.RegisterRateLimiterServer(srv, rl)
	if envoy != nil {
		rlsv3.RegisterRateLimitServiceServer(srv, envoy)
	}
	if s.Quota != nil {
		rlqsv3.RegisterRateLimitQuotaServiceServer(srv, s.Quota)
	}
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv) // for grpcurl
	if s.Gate != nil {
		s.Gate.srv.Store(srv) // its streaming methods get no unary deadline
	}
	return srv, hs
}
