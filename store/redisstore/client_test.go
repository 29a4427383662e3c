package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store/redisstore"
)

const secret = "s3cr3t-pa55"

func TestNewClientErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  redisstore.ClientConfig
	}{
		{"empty URL", redisstore.ClientConfig{}},
		{"bad scheme", redisstore.ClientConfig{URL: "http://u:" + secret + "@localhost:6379"}},
		{"unparsable", redisstore.ClientConfig{URL: "redis://u:" + secret + "@local host:port"}},
		{"unparsable, an @ in the password", redisstore.ClientConfig{URL: "redis://u:pa@" + secret + "@local host:port"}},
		{"bad port", redisstore.ClientConfig{URL: "redis://u:" + secret + "@localhost:notaport"}},
		{"no host", redisstore.ClientConfig{URL: "redis://"}},
		{"bad db", redisstore.ClientConfig{URL: "redis://u:" + secret + "@localhost:6379/x"}},
		{"unknown mode", redisstore.ClientConfig{URL: "redis://localhost:6379", Mode: "ring"}},
		{"addr without cluster", redisstore.ClientConfig{URL: "redis://localhost:1?addr=localhost:2"}},
		{"sentinel without master", redisstore.ClientConfig{URL: "redis://localhost:26379", Mode: "sentinel"}},
		{"sentinel routed by latency", redisstore.ClientConfig{URL: "redis://u:" + secret + "@localhost:26379?route_by_latency=true", Mode: "sentinel", SentinelMaster: "m"}},
		{"negative pool", redisstore.ClientConfig{URL: "redis://localhost:6379", PoolSize: -1}},
		{"bad cluster option", redisstore.ClientConfig{URL: "redis://u:" + secret + "@localhost:1?bogus=1", Mode: "cluster"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redisstore.NewClient(tc.cfg)
			if err == nil {
				_ = c.Close()
				t.Fatal("nil error")
			}
			if !errors.Is(err, redisstore.ErrClientConfig) {
				t.Errorf("error %v does not wrap ErrClientConfig", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestNewClientModes(t *testing.T) {
	c, err := redisstore.NewClient(redisstore.ClientConfig{URL: "rediss://u:" + secret + "@db.example:6380/3", PoolSize: 7, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, ok := c.(*redis.Client)
	if !ok {
		t.Fatalf("standalone: %T, want *redis.Client", c)
	}
	o := sc.Options()
	if o.Addr != "db.example:6380" || o.DB != 3 || o.Username != "u" || o.Password != secret || o.TLSConfig == nil ||
		o.PoolSize != 7 || o.DialTimeout != time.Second || o.ReadTimeout != 2*time.Second || o.WriteTimeout != 3*time.Second {
		t.Errorf("standalone options: addr %s db %d user %s tls %v pool %d timeouts %v %v %v", o.Addr, o.DB, o.Username, o.TLSConfig != nil, o.PoolSize, o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
	}

	c, err = redisstore.NewClient(redisstore.ClientConfig{URL: "redis://h:1?addr=h:2&addr=h:3", Mode: "cluster", PoolSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("cluster: %T, want *redis.ClusterClient", c)
	}
	if co := cc.Options(); strings.Join(co.Addrs, ",") != "h:1,h:2,h:3" || co.PoolSize != 5 {
		t.Errorf("cluster addrs %v pool %d, want h:1,h:2,h:3 and 5", co.Addrs, co.PoolSize)
	}

	c, err = redisstore.NewClient(redisstore.ClientConfig{URL: "redis://:" + secret + "@s1:26379/2?addr=s2:26379", Mode: "sentinel", SentinelMaster: "mymaster"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fc, ok := c.(*redis.Client)
	if !ok {
		t.Fatalf("sentinel: %T, want a failover *redis.Client", c)
	}
	if o := fc.Options(); o.Password != secret || o.DB != 2 {
		t.Errorf("sentinel: the master's password %q and db %d, want the URL's and 2", o.Password, o.DB)
	}
}

// TestNewClientLive: the clients NewClient builds reach a real server and
// a real cluster.
func TestNewClientLive(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartServer(t)
	c, err := redisstore.NewClient(redisstore.ClientConfig{URL: "redis://" + srv.Addr() + "/1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "db1", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := srv.Client().Exists(ctx, "db1").Result(); err != nil || n != 0 {
		t.Errorf("key written to db 1 visible in db 0: %d, %v", n, err)
	}

	cl := redistest.StartCluster(t, 3, 0)
	addrs := cl.Addrs()
	cc, err := redisstore.NewClient(redisstore.ClientConfig{URL: "redis://" + addrs[0] + "?addr=" + addrs[1], Mode: "cluster"})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for _, k := range []string{"a", "b", "c", "d"} {
		if err := cc.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("cluster SET %s: %v", k, err)
		}
	}
}
