package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
)

// fullLogLimit is the largest sliding window log: MaxLogRequests per hour.
var fullLogLimit = algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: algorithms.MaxLogRequests, Period: time.Hour}

// fillLog admits l.Requests units into key through the decide function, one
// every stepMs from startMs (so every unit has its own timestamp, the worst
// case for a per-millisecond log), and returns the time of the last.
func fillLog(tb testing.TB, c *redis.Client, key string, l algorithms.Limit, startMs, stepMs int64) int64 {
	tb.Helper()
	ctx := context.Background()
	if err := testLib.load(ctx, c); err != nil {
		tb.Fatal(err)
	}
	const chunk = 10
	now := startMs
	for done := int64(0); done < l.Requests; {
		p := c.Pipeline()
		var cmds []*redis.Cmd
		for i := 0; i < chunk && done < l.Requests; i++ {
			h := header{nowMs: now, keepMs: keepMs, calMs: now}
			arg := appendRequest(appendHeader(nil, h), l, 1, false, 0, h)
			cmds = append(cmds, p.FCall(ctx, testLib.decide, []string{key}, arg))
			now += stepMs
			done++
		}
		if _, err := p.Exec(ctx); err != nil {
			tb.Fatalf("filling the log: %v", err)
		}
		for _, cmd := range cmds {
			out := make([]algorithms.Decision, 1)
			if err := decodeReply(cmd.Val(), out, func(int) int64 { return l.Requests }); err != nil || !out[0].Allowed {
				tb.Fatalf("filling the log: %+v, %v", out[0], err)
			}
		}
	}
	return now - stepMs
}

// fcallUsecPerCall reads usec_per_call of FCALL from INFO commandstats:
// the Redis time of one script call, the script's own commands included.
func fcallUsecPerCall(tb testing.TB, c *redis.Client) float64 {
	tb.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_fcall:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_fcall:")), ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				us, err := strconv.ParseFloat(v, 64)
				if err != nil {
					tb.Fatalf("commandstats %q: %v", line, err)
				}
				return us
			}
		}
	}
	tb.Fatalf("no cmdstat_fcall in INFO commandstats:\n%s", info)
	return 0
}

// BenchmarkSlidingLogRedisFull measures one check on a full sliding window
// log (10,000 units, each at its own millisecond) in Redis time, read from
// INFO commandstats: "admit" is the steady state of a saturated key, the
// oldest unit leaving as a new one comes in; "deny" asks while nothing has
// left. redis-us/check is the figure to hold (the goal: at most 50 µs).
// "one-unit" is the reference: the same script on a log that never holds
// more than one unit, its cost the script's own, whatever the log; on a
// loaded machine every figure rises with it.
func BenchmarkSlidingLogRedisFull(b *testing.B) {
	srv := redistest.StartServer(b)
	c := srv.Client()
	ctx := context.Background()
	l := fullLogLimit
	start := int64(1_800_000_000_000)
	// One unit every W/10,000: in "admit", the oldest leaves as one comes.
	step := l.Period.Milliseconds() / l.Requests
	for _, mode := range []string{"one-unit", "admit", "deny"} {
		b.Run(mode, func(b *testing.B) {
			key := "bench:full:" + mode
			l := l
			last := start
			if mode == "one-unit" {
				l.Period = time.Millisecond
				if err := testLib.load(ctx, c); err != nil {
					b.Fatal(err)
				}
			} else {
				last = fillLog(b, c, key, l, start, step)
			}
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			now, by := last, int64(0)
			switch mode {
			case "admit":
				now, by = start+l.Period.Milliseconds()-step, step
			case "one-unit":
				by = 1
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				now += by
				h := header{nowMs: now, keepMs: keepMs, calMs: now}
				arg := appendRequest(appendHeader(nil, h), l, 1, false, 0, h)
				reply, err := c.FCall(ctx, testLib.decide, []string{key}, arg).Result()
				if err != nil {
					b.Fatal(err)
				}
				out := make([]algorithms.Decision, 1)
				if err := decodeReply(reply, out, func(int) int64 { return l.Requests }); err != nil || out[0].Allowed != (mode != "deny") {
					b.Fatalf("check %d: %+v, %v", i, out[0], err)
				}
			}
			b.StopTimer()
			b.ReportMetric(fcallUsecPerCall(b, c), "redis-us/check")
		})
	}
}

// maxFullLogRedisBytes is the documented bound on a full log key's MEMORY
// USAGE in Redis (script.go): 6 bytes a unit and a 19-byte header,
// 60,019 bytes for MaxLogRequests, which jemalloc rounds up to a 64 KiB
// allocation, plus the key and Redis' object headers.
const maxFullLogRedisBytes = 66_000

// TestSlidingLogRedisMemory fills a sliding window log to its cap, one unit
// per millisecond, and holds its Redis key to the documented bound.
func TestSlidingLogRedisMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a 10,000-unit log")
	}
	srv := redistest.StartServer(t)
	c := srv.Client()
	const key = "memtest:full"
	last := fillLog(t, c, key, fullLogLimit, 1_800_000_000_000, 1)
	got, err := runScript(context.Background(), c, last, []luaReq{{key: key, l: fullLogLimit, cost: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Allowed || got[0].Remaining != 0 {
		t.Fatalf("a check on the full log: %+v, want a deny with nothing remaining", got[0])
	}
	n, err := c.MemoryUsage(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEMORY USAGE of a full %d-unit log: %d bytes", fullLogLimit.Requests, n)
	if n > maxFullLogRedisBytes {
		t.Fatalf("MEMORY USAGE of a full log: %d bytes, want at most %d", n, maxFullLogRedisBytes)
	}
}
