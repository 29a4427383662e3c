package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
)

// redisCPU reads used_cpu_user + used_cpu_sys from INFO cpu, in seconds.
func redisCPU(tb testing.TB, c *redis.Client) float64 {
	tb.Helper()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		for _, p := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, p); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					tb.Fatalf("INFO cpu %q: %v", line, err)
				}
				sum += f
			}
		}
	}
	return sum
}

// minimalScript is the reference: a fixed window in its
// least Lua, INCRBY and PEXPIRE when new.
const minimalScript = `local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if v == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return v`

// BenchmarkScriptRedisCPU times the decision scripts in Redis' own CPU
// (INFO cpu before and after, over the decisions made), pipelined 16 calls
// deep over 10,000 keys at Redis' TIME as in production, next to the
// minimal script in the same run: "minimal" is the reference,
// the rest are floodgate's scripts, per algorithm, with 1 or 8 requests a
// call (8 on distinct keys of one slot, as the batcher merges them), in
// the binary form the store sends. redis-cpu-us/decision is the figure the goal
// holds: at most 4 µs with one descriptor. The limits are 100 per minute
// (1,000 for the log), so keys stay in Redis between their visits.
func BenchmarkScriptRedisCPU(b *testing.B) {
	srv := redistest.StartServer(b)
	c := srv.Client()
	ctx := context.Background()
	minimal := redis.NewScript(minimalScript)
	type variant struct {
		name   string
		script *redis.Script
		per    int // decisions a call
		args   func(i int) ([]string, []any)
	}
	tbKey := func(alg algorithms.Algorithm, i int) string {
		return stateKey(DefaultPrefix, alg, hashTag(fmt.Sprintf("kbench%d", i%10000)), "")
	}
	jakarta, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		b.Fatal(err)
	}
	calMs := time.Now().UnixMilli()
	decide := func(alg algorithms.Algorithm, per int) func(i int) ([]string, []any) {
		l := algorithms.Limit{Algorithm: alg, Requests: 100, Period: time.Minute}
		if alg == algorithms.SlidingWindowLog {
			l.Requests = 1000
		}
		calendar := per < 0 // a calendar month in Jakarta instead
		if calendar {
			per = -per
			l.Period, l.Calendar, l.Location = 0, algorithms.Month, jakarta
		}
		return func(i int) ([]string, []any) {
			keys := make([]string, per)
			buf := appendHeader(nil, header{nowMs: -1})
			for j := range keys {
				keys[j] = tbKey(alg, i*per+j)
				buf = appendRequest(buf, l, 1, false, calMs)
			}
			return keys, []any{buf}
		}
	}
	variants := []variant{
		{"minimal", minimal, 1, func(i int) ([]string, []any) {
			return []string{fmt.Sprintf("fw:{kbench%d}", i%10000)}, []any{1, 60000}
		}},
	}
	for _, alg := range algorithms.Algorithms {
		sc := leanLua
		if alg == algorithms.SlidingWindowLog {
			sc = fullLua
		}
		for _, per := range []int{1, 8} {
			variants = append(variants, variant{fmt.Sprintf("%s/%d", alg, per), sc, per, decide(alg, per)})
		}
		if alg == algorithms.FixedWindow || alg == algorithms.SlidingWindow {
			variants = append(variants, variant{fmt.Sprintf("%s/calendar/1", alg), sc, 1, decide(alg, -1)})
		}
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			if err := c.FlushAll(ctx).Err(); err != nil { // our own server
				b.Fatal(err)
			}
			if err := v.script.Load(ctx, c).Err(); err != nil {
				b.Fatal(err)
			}
			const depth = 16
			cmds := make([]*redis.Cmd, 0, depth)
			cpu0 := redisCPU(b, c)
			b.ResetTimer()
			for i := 0; i < b.N; {
				p := c.Pipeline()
				cmds = cmds[:0]
				for ; len(cmds) < depth && i < b.N; i++ {
					keys, args := v.args(i)
					cmds = append(cmds, v.script.EvalSha(ctx, p, keys, args...))
				}
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu := redisCPU(b, c) - cpu0
			b.ReportMetric(cpu*1e6/float64(b.N), "redis-cpu-us/call")
			b.ReportMetric(cpu*1e6/float64(b.N*v.per), "redis-cpu-us/decision")
		})
	}
}

// BenchmarkGoRedisEvalSha is go-redis' own cost of one script call, the
// floor under Store.Decide's allocations and CPU (compare BenchmarkDecide
// unbatched): one EVALSHA of a script that returns at once, with the KEYS
// and ARGV of one token-bucket decision.
func BenchmarkGoRedisEvalSha(b *testing.B) {
	srv := redistest.StartServer(b)
	c := srv.Client()
	ctx := context.Background()
	nop := redis.NewScript("return 1")
	if err := nop.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Minute}
	keys := []string{"fg:tb:{kbench}"}
	buf := appendRequest(appendHeader(nil, header{nowMs: -1}), l, 1, false, 0)
	b.ReportAllocs()
	for b.Loop() {
		if err := nop.EvalSha(ctx, c, keys, buf).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
