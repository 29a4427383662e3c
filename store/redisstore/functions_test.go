package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// luaScript is one function of the library, run as the store runs it:
// FCALL, after loading the library if Redis lacks it.
type luaScript struct {
	lib  *library
	name string
}

// Run runs the function with keys and args on c.
func (f luaScript) Run(ctx context.Context, c redis.Cmdable, keys []string, args ...any) *redis.Cmd {
	cmd := c.FCall(ctx, f.name, keys, args...)
	if functionMissing(cmd.Err()) {
		if err := f.lib.load(ctx, c); err != nil {
			cmd.SetErr(fmt.Errorf("load: %w", err))
			return cmd
		}
		cmd = c.FCall(ctx, f.name, keys, args...)
	}
	return cmd
}

var (
	testLib   = newLibrary(luaSource())
	decideLua = luaScript{&testLib, testLib.decide}
	settleLua = luaScript{&testLib, testLib.settle}
)

// libraries lists the names of the function libraries Redis holds.
func libraries(t *testing.T, c redis.Cmdable) []string {
	t.Helper()
	libs, err := c.FunctionList(context.Background(), redis.FunctionListQuery{}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range libs {
		names = append(names, l.Name)
	}
	return names
}

// decideN decides cost 1 against a token bucket of 100/min for each of
// keys, concurrently (so that batched calls share pipelines), and checks
// every decision leaves want tokens.
func decideN(t *testing.T, s *Store, step string, keys []string, want int64) {
	t.Helper()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Minute}
	log := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: time.Minute}
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]algorithms.Decision, 2)
			reqs := []store.Request{{Key: k, Limit: l, Cost: 1}, {Key: k, Limit: log, Cost: 1}}
			if err := s.Decide(context.Background(), time.Now(), reqs, out); err != nil {
				errs <- err
				return
			}
			if out[0].Remaining != want || !out[1].Allowed {
				errs <- fmt.Errorf("key %s: %+v, want Remaining %d", k, out, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("%s: %v", step, err)
	}
}

// TestFunctionFlush: the store loads its library on first use, and again
// after FUNCTION FLUSH, alone, batched, and in a cluster (a pipeline of
// calls to several masters, one flushed or all), without an error
// reaching the caller.
func TestFunctionFlush(t *testing.T) {
	srv := redistest.StartServer(t)
	cl := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	// masters runs f on every master (the server, or the cluster's).
	type masters func(f func(c *redis.Client) error) error
	standalone := func(f func(c *redis.Client) error) error { return f(srv.Client()) }
	cluster := func(f func(c *redis.Client) error) error {
		return cl.Client().ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error { return f(c) })
	}
	firstOnly := func(f func(c *redis.Client) error) error { return f(cl.Node(0).Client()) }
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		batch  int
		all    masters // where the library must be
		flush  masters // where FUNCTION FLUSH runs
	}{
		{"standalone/batch size 1", srv.Client(), 1, standalone, standalone},
		{"standalone/batched", srv.Client(), 0, standalone, standalone},
		{"cluster/batched", cl.Client(), 0, cluster, cluster},
		{"cluster/one master flushed", cl.Client(), 0, cluster, firstOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.client, Config{BatchMaxSize: tc.batch, Timeout: 5 * time.Second, BatchMaxWait: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			flush := func(on masters) {
				if err := on(func(c *redis.Client) error { return c.FunctionFlush(ctx).Err() }); err != nil {
					t.Fatal(err)
				}
			}
			check := func(step string) {
				_ = tc.all(func(c *redis.Client) error {
					if got := libraries(t, c); len(got) != 1 || got[0] != s.lib.name {
						t.Errorf("%s: libraries %v on %s, want [%s]", step, got, c.Options().Addr, s.lib.name)
					}
					return nil
				})
			}
			flush(tc.all)
			var keys []string
			for i := range 20 {
				keys = append(keys, fmt.Sprintf("flush-%s-%d", tc.name, i))
			}
			decideN(t, s, "first", keys, 99)
			check("first")
			for i, want := range []int64{98, 97} {
				flush(tc.flush)
				step := fmt.Sprintf("after FUNCTION FLUSH %d", i+1)
				decideN(t, s, step, keys, want)
				check(step)
			}
		})
	}
}

// TestLibraryVersions: two versions of the library (different sources)
// have different names and coexist on one Redis, each store calling its
// own, on shared state.
func TestLibraryVersions(t *testing.T) {
	srv := redistest.StartServer(t)
	admin := srv.Client()
	other := newLibrary(luaSource() + "\n-- another version\n")
	if other.name == testLib.name || !strings.HasPrefix(other.name, "floodgate_") || len(other.name) != len("floodgate_")+12 {
		t.Fatalf("names %q and %q: want two floodgate_<12 hex>", testLib.name, other.name)
	}
	cfg := Config{ClientTime: true, Timeout: 5 * time.Second, BatchMaxSize: 1}
	a, err := New(srv.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(srv.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.lib = other
	keys := []string{"versions"}
	decideN(t, a, "version a", keys, 99)
	decideN(t, b, "version b", keys, 98)
	decideN(t, a, "version a again", keys, 97)
	got := libraries(t, admin)
	if len(got) != 2 || !(got[0] == testLib.name && got[1] == other.name || got[1] == testLib.name && got[0] == other.name) {
		t.Fatalf("libraries %v, want %s and %s", got, testLib.name, other.name)
	}
}

// TestNoFunctions: on a Redis that does not know FCALL or FUNCTION (as
// Redis 6; here renamed away) Decide and Settle fail with an error that
// says Redis 7.0 is needed, alone and batched.
func TestNoFunctions(t *testing.T) {
	srv := redistest.StartServer(t, "--rename-command", "FCALL", "", "--rename-command", "FUNCTION", "")
	for _, batch := range []int{1, 0} {
		s, err := New(srv.Client(), Config{BatchMaxSize: batch, Timeout: 5 * time.Second, BatchMaxWait: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Minute}
		out := make([]algorithms.Decision, 1)
		err = s.Decide(context.Background(), time.Now(), []store.Request{{Key: "old", Limit: l, Cost: 1}}, out)
		if err == nil || !errors.Is(err, store.ErrMisconfigured) || !strings.Contains(err.Error(), "Redis 7.0") {
			t.Errorf("batch %d: Decide error %v, want a misconfiguration naming Redis 7.0", batch, err)
		}
		_, err = s.Settle(context.Background(), time.Now(), store.Settlement{Key: "old", Limit: l, Reserved: 1, Actual: 2, IdempotencyKey: "i"})
		if err == nil || !errors.Is(err, store.ErrMisconfigured) || !strings.Contains(err.Error(), "Redis 7.0") {
			t.Errorf("batch %d: Settle error %v, want a misconfiguration naming Redis 7.0", batch, err)
		}
		if err := s.Ping(context.Background()); !errors.Is(err, store.ErrMisconfigured) || !strings.Contains(err.Error(), "Redis 7.0") {
			t.Errorf("batch %d: Ping error %v, want a misconfiguration naming Redis 7.0", batch, err)
		}
		s.Close()
	}
}

// TestSettleAfterFlush: Settle loads the library when Redis lacks it
// (first use, FUNCTION FLUSH), like Decide.
func TestSettleAfterFlush(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()
	s, err := New(srv.Client(), Config{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Minute}
	for i, id := range []string{"first", "after flush"} {
		if err := srv.Client().FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := s.Settle(ctx, time.Now(), store.Settlement{Key: "settle-flush", Limit: l, Reserved: 1, Actual: 3, IdempotencyKey: id})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if want := int64(100 - 2*(i+1)); res.Decision.Remaining != want {
			t.Fatalf("%s: remaining %d, want %d", id, res.Decision.Remaining, want)
		}
	}
}
