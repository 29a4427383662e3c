package benchproc

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisStats is what one Redis node's INFO cpu and commandstats say at
// one moment.
type RedisStats struct {
	Scripts int64   // EVALSHA + EVAL + FCALL calls
	CPU     float64 // used_cpu_user + used_cpu_sys, seconds
	CPUMain float64 // used_cpu_user_main_thread + used_cpu_sys_main_thread, seconds
	HasMain bool    // the server reports the main-thread figures (Redis 7+)
	Cmds    map[string]CmdStat
}

// CmdStat is one command's line of INFO commandstats.
type CmdStat struct {
	Calls int64
	Usec  float64
}

// ReadRedisStats asks c's node for its INFO cpu and commandstats.
func ReadRedisStats(ctx context.Context, c *redis.Client) (RedisStats, error) {
	info, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return RedisStats{}, err
	}
	return ParseRedisStats(info), nil
}

// ParseRedisStats reads the text of INFO cpu and commandstats.
func ParseRedisStats(info string) RedisStats {
	s := RedisStats{Cmds: map[string]CmdStat{}}
	for _, line := range strings.Split(info, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if cmd, ok := strings.CutPrefix(name, "cmdstat_"); ok {
			var cs CmdStat
			for _, f := range strings.Split(val, ",") {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "calls":
					cs.Calls, _ = strconv.ParseInt(v, 10, 64)
				case "usec":
					cs.Usec, _ = strconv.ParseFloat(v, 64)
				}
			}
			s.Cmds[cmd] = cs
			if cmd == "evalsha" || cmd == "eval" || cmd == "fcall" {
				s.Scripts += cs.Calls
			}
			continue
		}
		switch name {
		case "used_cpu_user", "used_cpu_sys":
			v, _ := strconv.ParseFloat(val, 64)
			s.CPU += v
		case "used_cpu_user_main_thread", "used_cpu_sys_main_thread":
			v, _ := strconv.ParseFloat(val, 64)
			s.CPUMain += v
			s.HasMain = true
		}
	}
	return s
}
