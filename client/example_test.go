package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
	"github.com/floodgate/floodgate/internal/rules"
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

// The quick start: three requests per minute in a token bucket, asked four
// times in the same instant.
func Example() {
	addr, stop := exampleFloodgate(nil)
	defer stop()

	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	limit := client.Limit{Algorithm: algorithms.TokenBucket, Requests: 3, Period: time.Minute}
	for range 4 {
		d, err := c.Check(context.Background(), client.Request{Key: "user:42", Limit: limit})
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

// A named policy from the server's config: a login rule, 5 per
// 15 minutes in a sliding window, failing closed.
func ExamplePolicy() {
	cfg, err := rules.Parse("policies.yaml", []byte(`
policies:
  login: {algorithm: sliding_window, requests: 5, period: 15m, failure_mode: closed}
`))
	if err != nil {
		log.Fatal(err)
	}
	addr, stop := exampleFloodgate(floodgatetest.Static{Config: cfg})
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for i := 1; i <= 6; i++ {
		d, err := c.Check(context.Background(), client.Request{Key: "login:alice", Limit: client.Policy("login")})
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
	addr, stop := exampleFloodgate(nil)
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	perIP := client.Limit{Algorithm: algorithms.SlidingWindow, Requests: 2, Period: time.Minute}
	perKey := client.Limit{Algorithm: algorithms.SlidingWindow, Requests: 100, Period: time.Minute}
	for _, apiKey := range []string{"key-a", "key-b", "key-c"} {
		b, err := c.CheckBatch(context.Background(),
			client.Request{Key: "ip:203.0.113.7", Limit: perIP},
			client.Request{Key: "apikey:" + apiKey, Limit: perKey})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: allowed=%v (ip alone: %v, key alone: %v)\n", apiKey, b.Allowed, b.Decisions[0].Allowed, b.Decisions[1].Allowed)
	}
	d, err := c.Peek(context.Background(), client.Request{Key: "apikey:key-c", Limit: perKey})
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
	addr, stop := exampleFloodgate(nil)
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	limit := client.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Hour}
	if _, err := c.Check(ctx, client.Request{Key: "export:acme", Limit: limit, Cost: 10}); err != nil {
		log.Fatal(err)
	}
	d, err := c.Peek(ctx, client.Request{Key: "export:acme", Limit: limit})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("before reset: remaining=%d retry_after=%v\n", d.Remaining, d.RetryAfter)

	if err := c.Reset(ctx, "export:acme", algorithms.Unspecified); err != nil {
		log.Fatal(err)
	}
	d, err = c.Peek(ctx, client.Request{Key: "export:acme", Limit: limit})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after reset: remaining=%d allowed=%v\n", d.Remaining, d.Allowed)
	// Output:
	// before reset: remaining=0 retry_after=1h0m0s
	// after reset: remaining=10 allowed=true
}
