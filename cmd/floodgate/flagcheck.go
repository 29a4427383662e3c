package main

import (
	"fmt"
	"time"
)

// checkNumbers rejects numeric serve flags out of range, naming the flag,
// instead of quietly replacing them by a default: a typo such as
// --max-key-bytes -1 must not start a server with other limits than the
// operator wrote.
func (f *serveFlags) checkNumbers() error {
	ints := []struct {
		flag string
		v    int
		min  int
	}{
		{"max-key-bytes", f.maxKeyBytes, 1},
		{"max-recv-msg-bytes", f.maxRecvMsgBytes, 1},
		{"detailed-metric-series", f.detailSeries, 0},
		{"redis-pool-size", f.redisPoolSize, 0},
		{"redis-batch-max-size", f.redisBatchMaxSize, 1},
		{"redis-pipelines", f.redisPipelines, 1},
		{"deny-cache-size", f.denyCacheSize, 0},
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
		flag     string
		v        time.Duration
		positive bool
	}{
		{"drain-timeout", f.drainTimeout, true},
		{"redis-dial-timeout", f.redisDialTimeout, true},
		{"redis-batch-max-wait", f.redisBatchMaxWait, false},
	}
	for _, c := range durations {
		switch {
		case c.positive && c.v <= 0:
			return fmt.Errorf("--%s must be positive, got %v", c.flag, c.v)
		case c.v < 0:
			return fmt.Errorf("--%s must not be negative, got %v", c.flag, c.v)
		}
	}
	return nil
}
