package main

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisStats is what one Redis node's INFO says at one moment.
type redisStats struct {
	scripts int64   // evalsha + eval + fcall calls
	cpu     float64 // used_cpu_user + used_cpu_sys, seconds
	cpuMain float64 // used_cpu_user_main_thread + used_cpu_sys_main_thread
	hasMain bool    // the server reports the main-thread figures (Redis 7+)
	cmds    map[string]cmdStat
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  float64
}

func readRedisStats(ctx context.Context, c *redis.Client) (redisStats, error) {
	info, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return redisStats{}, err
	}
	return parseRedisStats(info), nil
}

func parseRedisStats(info string) redisStats {
	s := redisStats{cmds: map[string]cmdStat{}}
	for _, line := range strings.Split(info, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if cmd, ok := strings.CutPrefix(name, "cmdstat_"); ok {
			var cs cmdStat
			for _, f := range strings.Split(val, ",") {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "calls":
					cs.calls, _ = strconv.ParseInt(v, 10, 64)
				case "usec":
					cs.usec, _ = strconv.ParseFloat(v, 64)
				}
			}
			s.cmds[cmd] = cs
			if cmd == "evalsha" || cmd == "eval" || cmd == "fcall" {
				s.scripts += cs.calls
			}
			continue
		}
		switch name {
		case "used_cpu_user", "used_cpu_sys":
			v, _ := strconv.ParseFloat(val, 64)
			s.cpu += v
		case "used_cpu_user_main_thread", "used_cpu_sys_main_thread":
			v, _ := strconv.ParseFloat(val, 64)
			s.cpuMain += v
			s.hasMain = true
		}
	}
	return s
}

func memoryPerKey(ctx context.Context, c *redis.Client, match string, n int) (float64, int, error) {
	var keys []string
	iter := c.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) && len(keys) < n {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, 0, err
	}
	if len(keys) == 0 {
		return 0, 0, errors.New("no token-bucket keys in Redis")
	}
	var sum int64
	for _, k := range keys {
		v, err := c.MemoryUsage(ctx, k).Result()
		if err != nil {
			return 0, 0, err
		}
		sum += v
	}
	return float64(sum) / float64(len(keys)), len(keys), nil
}
