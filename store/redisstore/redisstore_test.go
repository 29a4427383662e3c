package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
	"github.com/floodgate/floodgate/store/storetest"
)

// testConfig decides at the now the suite passes (a simulated clock from
// 2000) and keeps keys an hour past their TTL, since Redis expires them by
// its own clock. Its timeout is generous: the race detector and a busy
// machine are slow, and these tests are not about timeouts.
func testConfig() redisstore.Config {
	return redisstore.Config{ClientTime: true, Timeout: 5 * time.Second}
}

func newStore(t testing.TB, c redis.UniversalClient, cfg redisstore.Config) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestConformanceStandalone(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, tc := range []struct {
		name      string
		batchSize int
	}{{"batched", 0}, {"unbatched", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.Store {
				cfg := testConfig()
				cfg.BatchMaxSize = tc.batchSize
				return newStore(t, srv.Client(), cfg)
			})
		})
	}
}

func TestConformanceCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	client := cl.Client()
	storetest.Run(t, func(t *testing.T) store.Store {
		return newStore(t, client, testConfig())
	})
}

// decide is one Decide call that must succeed.
func decide(t *testing.T, s store.Store, now time.Time, reqs ...store.Request) []algorithms.Decision {
	t.Helper()
	out := make([]algorithms.Decision, len(reqs))
	if err := s.Decide(context.Background(), now, reqs, out); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return out
}

var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// redisKey is the Redis key holding key's state under alg: its state key,
// or for a fixed window, which counts in a key per window, the one
// window key there is.
func redisKey(t *testing.T, c redis.UniversalClient, alg algorithms.Algorithm, key string) string {
	t.Helper()
	rk := redisstore.StateKey(alg, key)
	if !alg.Facts().Afresh {
		return rk
	}
	ks, err := c.Keys(context.Background(), strings.NewReplacer("{", "\\{", "}", "\\}").Replace(rk)+"#*").Result()
	if err != nil || len(ks) != 1 {
		t.Fatalf("window keys of %s: %v, %v; want one", rk, ks, err)
	}
	return ks[0]
}

func limit(alg algorithms.Algorithm, requests int64) algorithms.Limit {
	return algorithms.Limit{Algorithm: alg, Requests: requests, Period: time.Minute}
}

// TestRestartAndFunctionFlush: after FUNCTION FLUSH or a Redis restart, the
// next Decide succeeds (a restarted Redis without persistence has lost
// the function library, which the store loads again), alone, batched and
// concurrent.
func TestRestartAndFunctionFlush(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()
	for _, batchSize := range []int{1, 0} {
		t.Run(fmt.Sprintf("batch size %d", batchSize), func(t *testing.T) {
			admin := srv.Client()
			cfg := testConfig()
			cfg.BatchMaxSize = batchSize
			cfg.Timeout = 2 * time.Second // a restart may leave stale pooled connections to redial
			s := newStore(t, srv.Client(), cfg)
			defer s.Close()
			l := limit(algorithms.TokenBucket, 100)
			concurrent := func(step string, want int64) {
				t.Helper()
				var wg sync.WaitGroup
				errs := make(chan error, 20)
				for i := range 20 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						out := make([]algorithms.Decision, 2)
						reqs := []store.Request{
							{Key: fmt.Sprintf("restart-%d-%d", batchSize, i), Limit: l, Cost: 1},
							{Key: fmt.Sprintf("restart-%d-%d", batchSize, i), Limit: limit(algorithms.SlidingWindowLog, 10), Cost: 1},
						}
						if err := s.Decide(ctx, t0, reqs, out); err != nil {
							errs <- err
							return
						}
						if out[0].Remaining != want || !out[1].Allowed {
							errs <- fmt.Errorf("key %d: %+v, want Remaining %d", i, out, want)
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Errorf("%s: %v", step, err)
				}
			}
			concurrent("first", 99)
			if err := admin.FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			concurrent("after FUNCTION FLUSH", 98)
			srv.Restart()
			// The restarted Redis is empty: buckets are full again.
			concurrent("after restart", 99)
		})
	}
}

// TestCrossSlotAllOrNothing: in a cluster, a batch whose keys hash to
// different slots on different nodes is still all or nothing: the slot
// that denies charges nothing and the other slots are refunded.
func TestCrossSlotAllOrNothing(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	client := cl.Client()
	s := newStore(t, client, testConfig())
	defer s.Close()
	ctx := context.Background()

	// Pick keys whose state lives on three different nodes.
	l := limit(algorithms.SlidingWindow, 3)
	byNode := map[string]string{}
	for i := 0; len(byNode) < 3 && i < 1000; i++ {
		key := fmt.Sprintf("xslot-%d", i)
		shard, err := client.MasterForKey(ctx, "fg:sw:{"+key+"}")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byNode[shard.Options().Addr]; !ok {
			byNode[shard.Options().Addr] = key
		}
	}
	if len(byNode) != 3 {
		t.Fatalf("keys spread over %d nodes, want 3", len(byNode))
	}
	var keys []string
	for _, k := range byNode {
		keys = append(keys, k)
	}
	// Exhaust the last key.
	decide(t, s, t0, store.Request{Key: keys[2], Limit: l, Cost: 3})

	reqs := []store.Request{
		{Key: keys[0], Limit: l, Cost: 2},
		{Key: keys[1], Limit: l, Cost: 1},
		{Key: keys[1], Limit: limit(algorithms.TokenBucket, 5), Cost: 5},
		{Key: keys[2], Limit: l, Cost: 1},
	}
	out := decide(t, s, t0.Add(time.Millisecond), reqs...)
	for i := range 3 {
		if !out[i].Allowed {
			t.Fatalf("request %d: %+v, want allowed (it fits on its own)", i, out[i])
		}
	}
	if out[3].Allowed {
		t.Fatalf("request 3 on the exhausted key: %+v, want denied", out[3])
	}
	// Nothing stayed charged anywhere.
	now := t0.Add(2 * time.Millisecond)
	for i, r := range reqs[:3] {
		r.Cost = 0
		if d := decide(t, s, now, r)[0]; d.Remaining != r.Limit.Capacity() {
			t.Errorf("request %d's key after the denied batch: %+v, want Remaining %d (refunded)", i, d, r.Limit.Capacity())
		}
	}
	// Without the exhausted key the same batch charges all three nodes.
	out = decide(t, s, now, reqs[:3]...)
	for i, d := range out {
		if !d.Allowed {
			t.Fatalf("request %d: %+v, want allowed", i, d)
		}
	}
	if d := decide(t, s, now, store.Request{Key: keys[0], Limit: l})[0]; d.Remaining != 1 {
		t.Fatalf("key 0 after the admitted batch: %+v, want Remaining 1", d)
	}
}

// TestKeysWithBraces: user keys containing braces, the prefix, binary
// bytes or nothing stay in their own hash tag: distinct Redis keys, the
// slot the tag says, and no shared state.
func TestKeysWithBraces(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	client := cl.Client()
	ctx := context.Background()
	s := newStore(t, client, testConfig())
	defer s.Close()
	keys := []string{"a", "{a}", "{a", "a}", "}a{", "{}", "", "%", "%7Ba%7D", "fg:tb:{a}", "a\x00b", "\xff\xfe", "#", strings.Repeat("k", 200), strings.Repeat("k", 201)}
	l := limit(algorithms.TokenBucket, 100)
	for i, k := range keys {
		// Key i is charged i+1 once.
		decide(t, s, t0, store.Request{Key: k, Limit: l, Cost: int64(i + 1)})
	}
	for i, k := range keys {
		if d := decide(t, s, t0, store.Request{Key: k, Limit: l})[0]; d.Remaining != 100-int64(i+1) {
			t.Errorf("key %q: Remaining %d, want %d (its own state only)", k, d.Remaining, 100-(i+1))
		}
	}
	// Redis agrees with the slot the store groups requests by.
	for _, k := range keys {
		tag := redisstore.HashTag(k)
		got, err := client.ClusterKeySlot(ctx, "fg:tat:{"+tag+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if int(got) != redisstore.Slot(tag) {
			t.Errorf("key %q: CLUSTER KEYSLOT %d, store's slot %d", k, got, redisstore.Slot(tag))
		}
	}
	// Every Redis key has exactly one {...} hash tag, at its end.
	var (
		mu        sync.Mutex
		redisKeys []string
	)
	err := client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		ks, err := c.Keys(ctx, "fg:tat:*").Result()
		mu.Lock()
		defer mu.Unlock()
		redisKeys = append(redisKeys, ks...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(redisKeys) != len(keys) {
		t.Fatalf("%d Redis keys for %d user keys: %q", len(redisKeys), len(keys), redisKeys)
	}
	for _, rk := range redisKeys {
		open, close := strings.IndexByte(rk, '{'), strings.IndexByte(rk, '}')
		if strings.Count(rk, "{") != 1 || strings.Count(rk, "}") != 1 || close != len(rk)-1 || close-open < 2 {
			t.Errorf("Redis key %q: want one non-empty hash tag at the end", rk)
		}
		if len(rk) > 150 {
			t.Errorf("Redis key %q is %d bytes; long user keys should be hashed", rk, len(rk))
		}
	}
}

// TestMemoryUsage reports what a token-bucket key costs in Redis (target:
// at most 100 bytes of MEMORY USAGE).
func TestMemoryUsage(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second}) // the default 50ms fails on a loaded machine
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Minute}
	decide(t, s, time.Now(), store.Request{Key: "user:12345", Limit: l, Cost: 1})
	n, err := c.MemoryUsage(ctx, "fg:tat:{user:12345}").Result()
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(ctx, "fg:tat:{user:12345}").Result()
	if want := 600*time.Millisecond + max(600*time.Millisecond, redisstore.TBPadMin); err != nil || ttl <= 0 || ttl > want+want/64 {
		t.Errorf("PTTL = %v, %v; want the 600ms a token takes to come back, padded by a token's time or TBPadMin and rounded up by at most 1/64", ttl, err)
	}
	t.Logf("MEMORY USAGE of a token bucket key (fg:tat:{user:12345}, 100/min): %d bytes", n)
	if n > 100 {
		t.Errorf("MEMORY USAGE %d bytes, want at most 100", n)
	}
}

// TestFixedWindowMemory pins what a fixed window's window key costs:
// an integer (INCRBY's), at most the token bucket's 100 bytes of MEMORY
// USAGE for periods of a second to a day and a calendar month at full
// count.
func TestFixedWindowMemory(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second})
	defer s.Close()
	fw := func(n int64, p time.Duration) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Period: p}
	}
	month := func(n int64) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Calendar: algorithms.Month}
	}
	for i, tc := range []struct {
		name  string
		limit algorithms.Limit
	}{
		{"10 a second", fw(10, time.Second)},
		{"1000 a minute", fw(1000, time.Minute)},
		{"10000 an hour", fw(10000, time.Hour)},
		{"32767 a day", fw(32767, 24*time.Hour)},
		{"1000 a calendar month", month(1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "user:" + strconv.Itoa(12340+i) // as long as TestMemoryUsage's: the key's length counts too
			// Full count: the window's count at its widest.
			c.FlushDB(ctx)
			decide(t, s, time.Now(), store.Request{Key: key, Limit: tc.limit, Cost: tc.limit.Requests})
			rk := redisKey(t, c, algorithms.FixedWindow, key)
			n, err := c.MemoryUsage(ctx, rk).Result()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: MEMORY USAGE %d bytes", rk, n)
			if n > 100 {
				t.Errorf("MEMORY USAGE %d bytes, want at most 100", n)
			}
		})
	}
}

// TestServerTime: by default the script decides at Redis' clock, not the
// now passed to Decide.
func TestServerTime(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second})
	defer s.Close()
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Period: time.Hour}
	decide(t, s, t0, store.Request{Key: "clock", Limit: l, Cost: 1})
	// The log's one unit is stored as ms since 2026-01-01 in the last 6
	// bytes of its ring (lua/sliding_window_log.lua).
	v, err := c.Get(ctx, "fg:swl2:{clock}").Bytes()
	if err != nil || len(v) < 25 {
		t.Fatalf("log = %q, %v", v, err)
	}
	var rel int64 // the ring's last slot holds the newest unit
	for _, b := range slices.Backward(v[len(v)-6:]) {
		rel = rel<<8 | int64(b)
	}
	if at := rel + 1767225600000; at < before.UnixMilli() || at > before.Add(time.Minute).UnixMilli() {
		t.Fatalf("unit at %d, want Redis' time %d, not the now passed (%d)", at, before.UnixMilli(), t0.UnixMilli())
	}
}

// TestUnavailable: a Redis that is gone yields errors wrapping
// store.ErrUnavailable, batched or not.
func TestUnavailable(t *testing.T) {
	srv := redistest.StartServer(t)
	l := limit(algorithms.FixedWindow, 5)
	var stores []*redisstore.Store
	for _, batchSize := range []int{1, 0} {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
		defer c.Close()
		cfg := testConfig()
		cfg.BatchMaxSize = batchSize
		s := newStore(t, c, cfg)
		defer s.Close()
		decide(t, s, t0, store.Request{Key: "k", Limit: l, Cost: 1})
		stores = append(stores, s)
	}
	srv.Stop()
	for i, s := range stores {
		out := make([]algorithms.Decision, 1)
		err := s.Decide(context.Background(), t0, []store.Request{{Key: "k", Limit: l, Cost: 1}}, out)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("store %d: Decide on a stopped Redis: %v, want ErrUnavailable", i, err)
		}
		if err := s.Ping(context.Background()); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("store %d: Ping on a stopped Redis: %v, want ErrUnavailable", i, err)
		}
		if err := s.Reset(context.Background(), algorithms.Unspecified, "k"); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("store %d: Reset on a stopped Redis: %v, want ErrUnavailable", i, err)
		}
	}
}

func TestNewConfig(t *testing.T) {
	srv := redistest.StartServer(t)
	if _, err := redisstore.New(srv.Client(), redisstore.Config{Prefix: "a{b"}); err == nil {
		t.Error("New with a prefix holding '{': nil error")
	}
	if _, err := redisstore.New(nil, redisstore.Config{}); err == nil {
		t.Error("New with a nil client: nil error")
	}
	s := newStore(t, srv.Client(), redisstore.Config{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	out := make([]algorithms.Decision, 1)
	err := s.Decide(context.Background(), t0, []store.Request{{Key: "k", Limit: limit(algorithms.FixedWindow, 5), Cost: 1}}, out)
	if err == nil {
		t.Error("Decide after Close: nil error")
	}
	err = s.Decide(context.Background(), t0, []store.Request{{Key: "k", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow}, Cost: 1}}, out)
	if !errors.Is(err, store.ErrInvalid) || !errors.Is(err, algorithms.ErrInvalidLimit) {
		t.Errorf("Decide with an invalid limit: %v, want ErrInvalid and ErrInvalidLimit", err)
	}
}

// TestConformanceSentinel: the store on a master found through Redis
// Sentinel (NewClient in sentinel mode, as --redis-mode sentinel builds it)
// passes the conformance suite.
func TestConformanceSentinel(t *testing.T) {
	master := redistest.StartServer(t)
	sentinel := redistest.StartSentinel(t, master, "mymaster")
	client, err := redisstore.NewClient(redisstore.ClientConfig{
		URL: "redis://" + sentinel.Addr(), Mode: "sentinel", SentinelMaster: "mymaster",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, client, testConfig()) })
}
