package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/internal/api"
	"github.com/floodgate/floodgate/internal/rules"
)

// exampleFloodgate starts an in-process floodgate (as `floodgate serve`
// would run, embedded store) whose clock stands still at 2000-01-01, so
// the examples' output is exact. In real code the address is your
// floodgate's, e.g. "127.0.0.1:8081".
func exampleFloodgate(s api.Settings) (addr string, stop func()) {
	addr, stop, err := serveFloodgate(s)
	if err != nil {
		log.Fatal(err)
	}
	return addr, stop
}

// The quick start: three requests per minute in a token bucket, asked four
// times in the same instant.
func Example() {
	addr, stop := exampleFloodgate(api.Settings{})
	defer stop()

	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	limit := client.Limit{Algorithm: client.TokenBucket, Requests: 3, Period: time.Minute}
	for range 4 {
		d, err := c.Check(context.Background(), "user:42", limit)
		if err != nil {
			log.Fatal(err) // floodgate could not decide
		}
		fmt.Printf("allowed=%v remaining=%d retry_after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// allowed=true remaining=2 retry_after=0s
	// allowed=true remaining=1 retry_after=0s
	// allowed=true remaining=0 retry_after=0s
	// allowed=false remaining=0 retry_after=20s
}

// A named policy from the server's config: the seeds' login rule, 5 per
// 15 minutes in a sliding window, failing closed.
func ExamplePolicy() {
	cfg, err := rules.Parse("policies.yaml", []byte(`
policies:
  login: {algorithm: sliding_window, requests: 5, period: 15m, failure_mode: closed}
`))
	if err != nil {
		log.Fatal(err)
	}
	addr, stop := exampleFloodgate(api.Settings{Config: staticConfig{cfg}})
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for i := 1; i <= 6; i++ {
		d, err := c.Check(context.Background(), "login:alice", client.Policy("login"))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("attempt %d: allowed=%v remaining=%d\n", i, d.Allowed, d.Remaining)
	}
	// Output:
	// attempt 1: allowed=true remaining=4
	// attempt 2: allowed=true remaining=3
	// attempt 3: allowed=true remaining=2
	// attempt 4: allowed=true remaining=1
	// attempt 5: allowed=true remaining=0
	// attempt 6: allowed=false remaining=0
}

// Limit one request per IP and per API key at once: all or nothing, so a
// request denied by one limit is not charged to the other.
func ExampleClient_CheckBatch() {
	addr, stop := exampleFloodgate(api.Settings{})
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	perIP := client.Limit{Algorithm: client.SlidingWindow, Requests: 2, Period: time.Minute}
	perKey := client.Limit{Algorithm: client.SlidingWindow, Requests: 100, Period: time.Minute}
	for _, apiKey := range []string{"key-a", "key-b", "key-c"} {
		b, err := c.CheckBatch(context.Background(),
			client.Request{Key: "ip:203.0.113.7", Limit: perIP},
			client.Request{Key: "apikey:" + apiKey, Limit: perKey})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: allowed=%v (ip alone: %v, key alone: %v)\n", apiKey, b.Allowed, b.Decisions[0].Allowed, b.Decisions[1].Allowed)
	}
	d, err := c.Peek(context.Background(), "apikey:key-c", perKey)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("key-c was not charged: remaining=%d\n", d.Remaining)
	// Output:
	// key-a: allowed=true (ip alone: true, key alone: true)
	// key-b: allowed=true (ip alone: true, key alone: true)
	// key-c: allowed=false (ip alone: false, key alone: true)
	// key-c was not charged: remaining=100
}

// Peek looks without charging; Reset forgets a key.
func ExampleClient_Reset() {
	addr, stop := exampleFloodgate(api.Settings{})
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	limit := client.Limit{Algorithm: client.FixedWindow, Requests: 10, Period: time.Hour}
	if _, err := c.Check(ctx, "export:acme", limit, client.Cost(10)); err != nil {
		log.Fatal(err)
	}
	d, err := c.Peek(ctx, "export:acme", limit)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("before reset: remaining=%d retry_after=%v\n", d.Remaining, d.RetryAfter)

	if err := c.Reset(ctx, "export:acme", client.AnyAlgorithm); err != nil {
		log.Fatal(err)
	}
	d, err = c.Peek(ctx, "export:acme", limit)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after reset: remaining=%d allowed=%v\n", d.Remaining, d.Allowed)
	// Output:
	// before reset: remaining=0 retry_after=1h0m0s
	// after reset: remaining=10 allowed=true
}

// The HTTP middleware: by client IP and API key at once (so made-up keys
// never escape the IP's limit; see HTTPConfig.VerifyAPIKey to limit
// genuine keys alone), with the RateLimit and RateLimit-Policy headers (and
// their X-RateLimit-* forms) and a 429 JSON body. A token bucket of 60/min
// with burst 2 is a policy of 2 per 2s.
func ExampleMiddleware() {
	addr, stop := exampleFloodgate(api.Settings{})
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	limit := client.Middleware(c, client.HTTPConfig{
		Limit:       client.Limit{Algorithm: client.TokenBucket, Requests: 60, Period: time.Minute, Burst: 2},
		FailureMode: client.FailOpen,
	})
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "hello") })
	srv := httptest.NewServer(limit(api))
	defer srv.Close()

	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-API-Key", "k-123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d policy=%s ratelimit=%s retry-after=%q %s", resp.StatusCode,
			resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"), body)
	}
	// Output:
	// 200 policy="apikey";q=2;w=2 ratelimit="apikey";r=1;t=1 retry-after="" hello
	// 200 policy="apikey";q=2;w=2 ratelimit="apikey";r=0;t=2 retry-after="" hello
	// 429 policy="apikey";q=2;w=2 ratelimit="apikey";r=0;t=2 retry-after="1" {"error":"rate_limited","retry_after_seconds":1}
}

// The gRPC interceptors, on a service of yours (here grpc.health.v1): each
// API key gets 1 call per second, and so does each caller address (a key
// the caller writes is not trusted to stand alone; a call without one is
// keyed by its address); a denied call carries the wait.
func ExampleUnaryServerInterceptor() {
	addr, stop := exampleFloodgate(api.Settings{})
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	cfg := client.InterceptorConfig{
		Limit:       client.Limit{Algorithm: client.TokenBucket, Requests: 1, Period: time.Second},
		Key:         client.KeyFirst(client.KeyByMetadata("x-api-key"), client.KeyByPeer),
		KeyPrefix:   "health:",
		FailureMode: client.FailOpen,
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(client.UnaryServerInterceptor(c, cfg)),
		grpc.ChainStreamInterceptor(client.StreamServerInterceptor(c, cfg)))
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
