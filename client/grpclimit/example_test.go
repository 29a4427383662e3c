package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/grpclimit"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// exampleFloodgate starts an in-process floodgate (as `floodgate serve`
// would run, embedded store) whose clock stands still at 2000-01-01, so
// the examples' output is exact. In real code the address is your
// floodgate's, e.g. "127.0.0.1:8081".
func exampleFloodgate(rules floodgatetest.RuleSource) (addr string, stop func()) {
	addr, stop, err := floodgatetest.Serve(rules)
	if err != nil {
		log.Fatal(err)
	}
	return addr, stop
}

// The gRPC interceptors, on a service of yours (here grpc.health.v1): each
// API key gets 1 call per second, and so does each caller address (a key
// the caller writes is not trusted to stand alone; a call without one is
// keyed by its address); a denied call carries the wait.
func ExampleUnaryServerInterceptor() {
	addr, stop := exampleFloodgate(nil)
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	cfg := grpclimit.Config{
		Limit:       client.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Period: time.Second},
		Key:         grpclimit.KeyFirst(grpclimit.KeyByMetadata("x-api-key"), grpclimit.KeyByPeer),
		KeyPrefix:   "health:",
		FailureMode: client.FailOpen,
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(c, cfg)),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(c, cfg)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-123")
	for range 2 {
		var trailer metadata.MD
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		st := status.Convert(err)
		fmt.Print(st.Code())
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Printf(" retry_delay=%v retry-after=%v", ri.GetRetryDelay().AsDuration(), trailer.Get("retry-after"))
			}
		}
		fmt.Println()
	}
	// Output:
	// OK
	// ResourceExhausted retry_delay=1s retry-after=[1]
}
