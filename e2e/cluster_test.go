package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// clusterURL is the --redis-url of a cluster: the first node as the host,
// the others as addr= parameters.
func clusterURL(c *redistest.Cluster) string {
	addrs := c.Addrs()
	q := url.Values{"addr": addrs[1:]}
	return "redis://" + addrs[0] + "?" + q.Encode()
}

// clusterAlgorithms are the algorithms the admission test runs.
var clusterAlgorithms = []floodgatev1.Algorithm{
	floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
	floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW,
	floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW_LOG,
	floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW,
}

// redisKey is the Redis key of a Check API key under token_bucket, with
// the default prefix (store/redisstore's layout: fg:tat:{k<key>}); keys
// without '{', '}', '%', '#', spaces or non-ASCII bytes stand for
// themselves in the tag.
// redisKey is the Redis key of a Check key under the token bucket of
// TestClusterFailover's inline limit (1000 per hour, burst 0).
func redisKey(key string) string { return "fg:tat:{k" + key + "}:i1000/1h" }

// TestClusterExactAdmission: 300 concurrent Checks on one key with a limit
// of 100 admit exactly 100 on a 3-master cluster with replicas, for every
// algorithm. --failure-mode closed and a generous --redis-timeout mean a
// slow call cannot slip through as a degraded allow; none may be degraded.
func TestClusterExactAdmission(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	p := startServe(t, "--redis-mode", "cluster", "--redis-url", clusterURL(cl), "--failure-mode", "closed", "--redis-timeout", "2s")
	c := p.Client(t)
	for _, alg := range clusterAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			req := &floodgatev1.CheckRequest{
				Key: "hot:" + alg.String(), Algorithm: alg,
				// A day: no window edge or refill during the test.
				Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 100, Period: durationpb.New(24 * time.Hour)}},
			}
			const n = 300
			var wg sync.WaitGroup
			start := make(chan struct{})
			resps := make([]*floodgatev1.CheckResponse, n)
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					resps[i], errs[i] = c.Check(ctx, req)
				}()
			}
			close(start)
			wg.Wait()
			allowed := 0
			for i := range n {
				switch {
				case errs[i] != nil:
					t.Errorf("check %d: %v", i, errs[i])
				case resps[i].Degraded:
					t.Errorf("check %d: degraded answer %v", i, resps[i])
				case resps[i].Allowed:
					allowed++
				}
			}
			if allowed != 100 {
				t.Errorf("%d of %d concurrent checks allowed, want exactly 100", allowed, n)
			}
		})
	}
}

// TestClusterFailover kills the master holding a key's slot: the cluster
// promotes its replica, and floodgate, without a restart, decides that key
// with the store again within a bounded time. No call ever errors, and
// every answer is in time; while the slot has no master, answers are the
// declared failure mode (closed: denied, degraded).
func TestClusterFailover(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	waitReplicasSynced(t, cl)
	const timeout = 250 * time.Millisecond
	p := startServe(t, "--redis-mode", "cluster", "--redis-url", clusterURL(cl), "--failure-mode", "closed", "--redis-timeout", timeout.String())
	c := p.Client(t)
	ctx := context.Background()
	const key = "failover:user"
	req := &floodgatev1.CheckRequest{
		Key: key, Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
		Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1000, Period: durationpb.New(time.Hour)}},
	}
	healthy := func() bool {
		resp, err := c.Check(ctx, req)
		if err != nil {
			t.Fatalf("check: %v", err)
		}
		if !resp.Degraded && !resp.Allowed {
			t.Fatalf("healthy answer denied: %v", resp)
		}
		if resp.Degraded && resp.Allowed {
			t.Fatalf("degraded answer allowed under --failure-mode closed: %v", resp)
		}
		return !resp.Degraded
	}
	waitFor(t, 10*time.Second, "a healthy decision before the failover", healthy)

	// Find the master of the key's slot, and a node that survives.
	master, err := ownerOf(ctx, cl.Node(0).Client(), redisKey(key))
	if err != nil {
		t.Fatal(err)
	}
	victim, survivor := -1, -1
	for i, a := range cl.Addrs() {
		switch {
		case a == master:
			victim = i
		case survivor < 0:
			survivor = i
		}
	}
	if victim < 0 {
		t.Fatalf("master %s is not one of the nodes %v", master, cl.Addrs())
	}
	// The key's state exists on the master.
	if n, err := cl.Node(victim).Client().Exists(ctx, redisKey(key)).Result(); err != nil || n != 1 {
		t.Fatalf("key %s on its master %s: exists=%d %v", redisKey(key), master, n, err)
	}
	t.Logf("key %s: master %s (node %d)", redisKey(key), master, victim)

	cl.Kill(victim)
	killed := time.Now()

	// The cluster promotes the replica: poll a surviving node.
	via := cl.Node(survivor).Client()
	defer func() {
		if t.Failed() {
			nodes, err := via.ClusterNodes(ctx).Result()
			t.Logf("CLUSTER NODES via %s:\n%s%v", via.Options().Addr, nodes, err)
		}
	}()
	// Meanwhile, a key on a healthy master: how many of its answers
	// degrade is logged, not asserted. While a slot has no master, every
	// node answers CLUSTERDOWN (cluster-require-full-coverage yes, Redis'
	// default), and the breaker, one for the whole cluster, then opens.
	otherKey := ""
	for i := 0; otherKey == ""; i++ {
		k := fmt.Sprint("elsewhere:", i)
		if a, err := ownerOf(ctx, via, redisKey(k)); err == nil && a != master {
			otherKey = k
		}
	}
	other := &floodgatev1.CheckRequest{Key: otherKey, Algorithm: req.Algorithm, Source: req.Source}
	var otherCalls, otherDegraded int
	promoted := waitFor(t, 30*time.Second, "replica promoted", func() bool {
		resp, err := c.Check(ctx, other)
		if err != nil {
			t.Fatalf("check on a healthy master's key: %v", err)
		}
		otherCalls++
		if resp.Degraded {
			otherDegraded++
		}
		info, err := via.ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
		a, err := ownerOf(ctx, via, redisKey(key))
		return err == nil && a != master
	})
	newMaster, _ := ownerOf(ctx, via, redisKey(key))
	t.Logf("replica %s promoted %v after the kill; meanwhile %d of %d checks on a key of a healthy master were degraded", newMaster, promoted, otherDegraded, otherCalls)

	// floodgate follows without a restart. Every call meanwhile answers in
	// time and as declared (checked by healthy).
	var slowest time.Duration
	recovered := waitFor(t, 10*time.Second, "healthy decisions on the promoted master", func() bool {
		start := time.Now()
		ok := healthy()
		slowest = max(slowest, time.Since(start))
		return ok
	})
	t.Logf("floodgate decided on the new master %v after the promotion (%v after the kill); slowest call %v", recovered, time.Since(killed), slowest)
	if bound := timeout + latencyMargin; slowest > bound {
		t.Errorf("slowest call during the failover took %v, more than %v", slowest, bound)
	}
	// And keeps deciding on the new master: the key's state is written
	// there.
	for range 10 {
		if !healthy() {
			t.Fatal("degraded answer after recovery")
		}
	}
	if n, err := cl.Client().Exists(ctx, redisKey(key)).Result(); err != nil || n != 1 {
		t.Fatalf("key %s after the failover: exists=%d %v", redisKey(key), n, err)
	}
}

// waitReplicasSynced waits until every replica has completed its first
// sync with its master. A replica that never synced does not take over
// when its master dies (its data counts as too old), and a new master
// delays a replica's first sync by repl-diskless-sync-delay (5s by
// default), which this sets to 0; redistest.StartCluster waits only for
// cluster_state:ok.
func waitReplicasSynced(t *testing.T, cl *redistest.Cluster) {
	t.Helper()
	ctx := context.Background()
	for i := range cl.Len() {
		if err := cl.Node(i).Client().ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
			t.Fatal(err)
		}
	}
	took := waitFor(t, 30*time.Second, "replicas synced", func() bool {
		replicas := 0
		for i := range cl.Len() {
			info, err := cl.Node(i).Client().Info(ctx, "replication").Result()
			if err != nil {
				return false
			}
			if strings.Contains(info, "role:slave") {
				replicas++
				if !strings.Contains(info, "master_link_status:up") {
					return false
				}
			}
		}
		return replicas == cl.Len()/2
	})
	t.Logf("replicas synced after %v", took)
}

// ownerOf is the address of the master serving key's slot, as via sees it.
func ownerOf(ctx context.Context, via *redis.Client, key string) (string, error) {
	slot, err := via.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", err
	}
	shards, err := via.ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if slot < r.Start || slot > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" {
					return net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10)), nil
				}
			}
		}
	}
	return "", fmt.Errorf("slot %d of %s has no owner", slot, key)
}
