package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// TestMisconfigured: a Redis that answers but can never decide in the
// client's mode (a cluster node or a replica behind a standalone client, a
// plain Redis behind a cluster client) makes CheckServer, Ping and Decide
// fail with store.ErrMisconfigured (still store.ErrUnavailable, so the
// failure modes answer) and a message naming the fix. It used to be
// reported as unavailable only, like an outage that would end.
func TestMisconfigured(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	master := redistest.StartServer(t)
	replica := redistest.StartServer(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
	// Keys of several slots: a cluster node answers CROSSSLOT or MOVED.
	reqs := []store.Request{
		{Key: "a", Limit: limit(algorithms.TokenBucket, 5), Cost: 1},
		{Key: "b", Limit: limit(algorithms.TokenBucket, 5), Cost: 1},
		{Key: "c", Limit: limit(algorithms.TokenBucket, 5), Cost: 1},
	}
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		mode   string
		want   []string // in every error
	}{
		{"standalone on a cluster node", redis.NewClient(&redis.Options{Addr: cl.Addrs()[0]}), "", []string{"--redis-mode cluster", cl.Addrs()[0]}},
		{"standalone on a replica", redis.NewClient(&redis.Options{Addr: replica.Addr()}), redisstore.ModeStandalone, []string{"replica", replica.Addr(), "--redis-url", "master"}},
		{"cluster on a plain Redis", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{master.Addr()}}), "", []string{"--redis-mode standalone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.client.Close()
			cfg := testConfig()
			cfg.Mode = tc.mode
			s := newStore(t, tc.client, cfg)
			defer s.Close()
			ctx := context.Background()
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, store.ErrMisconfigured) || !errors.Is(err, store.ErrUnavailable) {
					t.Fatalf("%s: %v, want ErrMisconfigured (and ErrUnavailable)", op, err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q does not name %q", op, err, w)
					}
				}
			}
			check("CheckServer", s.CheckServer(ctx))
			check("Ping", s.Ping(ctx))
			check("Decide", s.Decide(ctx, t0, reqs, make([]algorithms.Decision, len(reqs))))
		})
	}
}

// TestCheckServerFits: the right mode passes CheckServer and Ping; a
// replica's READONLY under Sentinel is a moment of a failover, so it is
// unavailable, not misconfigured.
func TestCheckServerFits(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	master := redistest.StartServer(t)
	replica := redistest.StartServer(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		mode   string
	}{
		{"standalone", master.Client(), ""},
		{"cluster", cl.Client(), ""},
		{"sentinel mode on a replica", replica.Client(), redisstore.ModeSentinel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Mode = tc.mode
			s := newStore(t, tc.client, cfg)
			defer s.Close()
			if err := s.CheckServer(ctx); err != nil {
				t.Errorf("CheckServer: %v", err)
			}
			if err := s.Ping(ctx); err != nil {
				t.Errorf("Ping: %v", err)
			}
		})
	}
	cfg := testConfig()
	cfg.Mode = redisstore.ModeSentinel
	s := newStore(t, replica.Client(), cfg)
	defer s.Close()
	err := s.Decide(ctx, t0, []store.Request{{Key: "k", Limit: limit(algorithms.TokenBucket, 5), Cost: 1}}, make([]algorithms.Decision, 1))
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrMisconfigured) {
		t.Errorf("Decide on a replica in sentinel mode: %v, want unavailable, not misconfigured", err)
	}
}

// TestPingAnswersNoError: the health probe leaves Redis' error counters
// alone, so a dashboard's error rate does not climb with every probe.
// Only the first Ping may meet a missing function (it then loads the
// library); the probes after it answer no error at all. (The client does
// not name itself on connect: Redis 7.0 answers CLIENT SETINFO with an
// error, once a connection, which is not the probe's.)
func TestPingAnswersNoError(t *testing.T) {
	srv := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
	defer client.Close()
	for _, mode := range []string{redisstore.ModeStandalone, redisstore.ModeSentinel} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			cfg := testConfig()
			cfg.Mode = mode
			s := newStore(t, client, cfg)
			defer s.Close()
			if err := s.Ping(ctx); err != nil {
				t.Fatalf("Ping: %v", err)
			}
			before := errorCount(t, client)
			for range 20 {
				if err := s.Ping(ctx); err != nil {
					t.Fatalf("Ping: %v", err)
				}
			}
			if got := errorCount(t, client); got != before {
				t.Errorf("20 Pings: Redis counted %d error replies, want 0", got-before)
			}
		})
	}
}

// errorCount is the error replies Redis has answered (INFO stats'
// total_error_replies).
func errorCount(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatalf("INFO stats: %v", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "total_error_replies:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("total_error_replies %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("INFO stats has no total_error_replies")
	return 0
}

// TestPingProbesScriptingOnce: the scripting probe runs on the first Ping
// and on the first after a failed one, so health checks every few hundred
// ms add no script call to Redis' decision traffic (INFO commandstats).
func TestPingProbesScriptingOnce(t *testing.T) {
	srv := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
	defer client.Close()
	ctx := context.Background()
	s := newStore(t, client, testConfig())
	defer s.Close()
	before := fcallCount(t, client)
	for range 20 {
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	}
	if got := fcallCount(t, client) - before; got != 1 {
		t.Errorf("20 Pings: %d FCALLs, want 1 (the first Ping's probe)", got)
	}
}

// fcallCount is how many FCALLs Redis has run to completion (INFO
// commandstats: calls less failed_calls).
func fcallCount(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	var n int64
	for line := range strings.Lines(info) {
		stats, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_fcall:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(f, "=")
			c, err := strconv.ParseInt(v, 10, 64)
			switch {
			case k != "calls" && k != "failed_calls":
			case err != nil:
				t.Fatalf("cmdstat_fcall %q: %v", stats, err)
			case k == "calls":
				n += c
			default:
				n -= c
			}
		}
	}
	return n
}
