package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/store/redisstore"
)

// TestNewClientOverrides: in every mode, what ClientConfig sets replaces
// the URL's options (a pool of 1, the password, each timeout on its own
// field), and what it leaves unset keeps them.
func TestNewClientOverrides(t *testing.T) {
	const url = "redis://u:from-url@h:1?pool_size=10&dial_timeout=1s&read_timeout=1s&write_timeout=1s"
	everything := redisstore.ClientConfig{PoolSize: 1, Password: "p", DialTimeout: 2 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 4 * time.Second}
	for _, mode := range []string{redisstore.ModeStandalone, redisstore.ModeCluster, redisstore.ModeSentinel} {
		for _, tc := range []struct {
			name string
			cfg  redisstore.ClientConfig
			want [5]any // pool, password, dial, read, write
		}{
			{"nothing set", redisstore.ClientConfig{}, [5]any{10, "from-url", time.Second, time.Second, time.Second}},
			{"everything set", everything, [5]any{1, "p", 2 * time.Second, 3 * time.Second, 4 * time.Second}},
		} {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				cfg := tc.cfg
				cfg.URL, cfg.Mode, cfg.SentinelMaster = url, mode, "m"
				c, err := redisstore.NewClient(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				var got [5]any
				switch c := c.(type) {
				case *redis.ClusterClient:
					o := c.Options()
					got = [5]any{o.PoolSize, o.Password, o.DialTimeout, o.ReadTimeout, o.WriteTimeout}
				case *redis.Client:
					o := c.Options()
					got = [5]any{o.PoolSize, o.Password, o.DialTimeout, o.ReadTimeout, o.WriteTimeout}
				}
				if got != tc.want {
					t.Fatalf("pool, password, dial, read, write = %v, want %v", got, tc.want)
				}
			})
		}
	}
}
