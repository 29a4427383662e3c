package httplimit_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/httplimit"
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

// The HTTP middleware: by client IP and API key at once (so made-up keys
// never escape the IP's limit; see Config.VerifyAPIKey to limit
// genuine keys alone), with the RateLimit and RateLimit-Policy headers (and
// their X-RateLimit-* forms) and a 429 JSON body. A token bucket of 60/min
// with burst 2 is a policy of 2 per 2s.
func ExampleMiddleware() {
	addr, stop := exampleFloodgate(nil)
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	limit := httplimit.Middleware(c, httplimit.Config{
		Limit:       client.Limit{Algorithm: algorithms.TokenBucket, Requests: 60, Period: time.Minute, Burst: 2},
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
