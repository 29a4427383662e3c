package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// TestGRPCMaxRecvMsgBytes: the gRPC server serve builds takes a request
// of --max-recv-msg-bytes and refuses a larger one with
// ResourceExhausted, above and below the default bound.
func TestGRPCMaxRecvMsgBytes(t *testing.T) {
	for _, max := range []int{1024, 4 << 20} {
		f, st := adminTestStore(t)
		f.maxRecvMsgBytes, f.maxKeyBytes = max, 8<<20
		reg, metrics := newMetrics()
		env := serveEnv{f: &f, reg: reg, metrics: metrics, log: slog.New(slog.DiscardHandler)}
		p, err := env.buildGRPCPipeline(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		quota, quotaCloser, err := openQuota(f, nil, prometheus.NewRegistry(), env.log)
		if err != nil {
			t.Fatal(err)
		}
		defer quotaCloser.Close()
		srv, _ := env.buildGRPC(p, env.buildAPIs(st, nil, nil, nil), quota)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(lis) }()
		defer srv.Stop()
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rl := floodgatev1.NewRateLimiterClient(conn)
		limit := &floodgatev1.Limit{Requests: 10, Period: durationpb.New(time.Minute)}
		check := func(keyBytes int) codes.Code {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := rl.Check(ctx, &floodgatev1.CheckRequest{Key: strings.Repeat("k", keyBytes), Source: &floodgatev1.CheckRequest_Limit{Limit: limit}},
				grpc.MaxCallSendMsgSize(16<<20))
			return status.Code(err)
		}
		if got := check(max - 100); got == codes.ResourceExhausted {
			t.Errorf("--max-recv-msg-bytes %d: a request of about %d bytes refused", max, max-100)
		}
		if got := check(max + 100); got != codes.ResourceExhausted {
			t.Errorf("--max-recv-msg-bytes %d: a request over it answered %v, want ResourceExhausted", max, got)
		}
	}
}
