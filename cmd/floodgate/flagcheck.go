package main

import (
	"fmt"
	"math"
	"time"
)

// checkNumbers rejects numeric serve flags out of range, naming the flag
// and the value, instead of quietly replacing them by a default.
func (f *serveFlags) checkNumbers() error {
	ints := []struct {
		flag string
		v    int
		min  int
	}{
		{"max-key-bytes", f.maxKeyBytes, 1},
		{"memory-max-keys", f.memory.MaxKeys, 1},
		{"max-recv-msg-bytes", f.maxRecvMsgBytes, 1},
		{"max-header-list-bytes", int(min(f.limits.MaxHeaderListBytes, math.MaxInt32)), 1},
		{"max-streams", f.limits.MaxStreams, 1},
		{"max-streams-per-client", f.limits.MaxStreamsPerClient, 1},
		{"max-connections", f.limits.MaxConnections, 1},
		{"max-connections-per-client", f.limits.MaxConnectionsPerClient, 1},
		{"detailed-metric-series", f.envoy.DetailedMetricSeries, 0},
		{"redis-pool-size", f.redisConn.PoolSize, 0},
		{"redis-batch-max-size", f.redis.BatchMaxSize, 1},
		{"redis-pipelines", f.redis.BatchPipelines, 1},
		{"deny-cache-size", f.denyCacheSize, 0},
		{"quota-max-buckets-per-stream", f.quota.MaxBucketsPerStream, 1},
		{"limited-rules", f.limited.cfg.Rules, 1},
		{"replicas", f.local.replicas, 0},
	}
	for _, c := range ints {
		if c.v < c.min {
			what := "must not be negative"
			if c.min > 0 {
				what = "must be positive"
			}
			return fmt.Errorf("--%s %s, got %d", c.flag, what, c.v)
		}
	}
	durations := []struct {
		flag   string
		v, min time.Duration
	}{
		{"drain-timeout", f.drainTimeout, 1},
		{"unary-timeout", f.limits.UnaryTimeout, 1},
		{"redis-timeout", f.redis.Timeout, 1},
		{"redis-dial-timeout", f.redisConn.DialTimeout, 1},
		{"redis-batch-max-wait", f.redis.BatchMaxWait, 0},
		{"quota-assignment-ttl", f.quota.AssignmentTTL, 1},
		{"replicas-heartbeat", f.local.heartbeat, 1},
		{"settle-window", f.memory.SettleWindow, time.Millisecond},
	}
	for _, c := range durations {
		switch {
		case c.v >= c.min:
		case c.min == 1:
			return fmt.Errorf("--%s must be positive, got %v", c.flag, c.v)
		case c.min == 0:
			return fmt.Errorf("--%s must not be negative, got %v", c.flag, c.v)
		default:
			return fmt.Errorf("--%s must be at least %v, got %v", c.flag, c.min, c.v)
		}
	}
	return nil
}
