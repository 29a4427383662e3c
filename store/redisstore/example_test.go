package redisstore_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// Example decides on a Redis that floodgate replicas may share, from a Go
// service, the way go-redis/redis_rate is used: 5 logins a minute per user
// with a sliding window, decided atomically by the store's Lua script on
// Redis' clock. (The output is checked against a real Redis by
// TestExampleOutput.)
func Example() {
	// MaxRetries -1: a decision is never sent twice (see New).
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: -1})
	defer client.Close()
	if err := exampleLogins(context.Background(), client, os.Stdout); err != nil {
		fmt.Println(err)
	}
}

// exampleLogins is Example's body: six login attempts of one user.
func exampleLogins(ctx context.Context, client redis.UniversalClient, out io.Writer) error {
	st, err := redisstore.New(client, redisstore.Config{Prefix: "myapp:"})
	if err != nil {
		return err
	}
	defer st.Close()
	login := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 5, Period: time.Minute}
	for i := range 6 {
		reqs := []store.Request{{Key: "login:alice", Limit: login, Cost: 1}}
		out1 := make([]algorithms.Decision, 1)
		if err := st.Decide(ctx, time.Now(), reqs, out1); err != nil {
			return err
		}
		d := out1[0]
		fmt.Fprintf(out, "attempt %d: allowed=%v remaining=%d retry_later=%v\n", i+1, d.Allowed, d.Remaining, d.RetryAfter > 0)
	}
	return nil
}

// TestExampleOutput runs Example's body on a real Redis and checks what it
// prints.
func TestExampleOutput(t *testing.T) {
	srv := redistest.StartServer(t)
	var out strings.Builder
	if err := exampleLogins(context.Background(), srv.Client(), &out); err != nil {
		t.Fatal(err)
	}
	want := `attempt 1: allowed=true remaining=4 retry_later=false
attempt 2: allowed=true remaining=3 retry_later=false
attempt 3: allowed=true remaining=2 retry_later=false
attempt 4: allowed=true remaining=1 retry_later=false
attempt 5: allowed=true remaining=0 retry_later=false
attempt 6: allowed=false remaining=0 retry_later=true
`
	if out.String() != want {
		t.Errorf("Example printed\n%s\nwant\n%s", out.String(), want)
	}
}
