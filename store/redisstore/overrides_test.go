package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestOverridesApply: what ClientConfig sets replaces the URL's options
// (a pool of 1 and each timeout on its own field), what it leaves unset
// keeps them.
func TestOverridesApply(t *testing.T) {
	url := redis.Options{PoolSize: 10, Password: "from-url", DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
	tests := []struct {
		name string
		cfg  ClientConfig
		want redis.Options
	}{
		{"nothing set", ClientConfig{}, url},
		{"everything set", ClientConfig{PoolSize: 1, Password: "p", DialTimeout: 2 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 4 * time.Second},
			redis.Options{PoolSize: 1, Password: "p", DialTimeout: 2 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 4 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := url
			if err := (overrides{&o.PoolSize, &o.Password, o.TLSConfig, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout}).apply(tc.cfg); err != nil {
				t.Fatal(err)
			}
			got := [5]any{o.PoolSize, o.Password, o.DialTimeout, o.ReadTimeout, o.WriteTimeout}
			want := [5]any{tc.want.PoolSize, tc.want.Password, tc.want.DialTimeout, tc.want.ReadTimeout, tc.want.WriteTimeout}
			if got != want {
				t.Fatalf("pool, password, dial, read, write = %v, want %v", got, want)
			}
		})
	}
}
