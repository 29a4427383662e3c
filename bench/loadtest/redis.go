package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store/redisstore"
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

// floodgateBenchCall is floodgate's Lua script and the EVALSHA arguments
// after the SHA (numkeys, the key, ARGV) of one token-bucket decision
// (1,000,000/s, cost 1, Redis' clock), as floodgate sends it;
// redis-benchmark replaces __rand_int__ in the key. The ARGV layout is the
// Redis store's: this is the one place to change when it does.
func floodgateBenchCall() (src string, args []string) {
	src, argv := redisstore.BenchmarkEval(algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1_000_000, Period: time.Second}, 1)
	return src, []string{"1", "fg:tb:{kbench__rand_int__}", argv}
}

// benchCall is one call redis-benchmark repeats: a function run by FCALL
// (lib not empty; args after the function's name), a script run by
// EVALSHA (src not empty; args after the SHA) or a plain command (args).
type benchCall struct {
	name string
	lib  string // a function library's source
	fn   string // the function of lib to call
	src  string
	args []string
	stat string // its INFO commandstats name
}

// floodgateBenchFunction is floodgateBenchCall as the store runs it on
// Redis 7: the function library and FCALL's arguments after the name.
func floodgateBenchFunction() (lib, fn string, args []string) {
	lib, fn, argv := redisstore.BenchmarkFunction(algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1_000_000, Period: time.Second}, 1)
	return lib, fn, []string{"1", "fg:tb:{kbench__rand_int__}", argv}
}

// scriptCalls are the calls of the script-cost comparison: floodgate's
// script for one decision against the least a decision can cost in Lua.
func scriptCalls() []benchCall {
	fgSrc, fgArgs := floodgateBenchCall()
	fgLib, fgFn, fnArgs := floodgateBenchFunction()
	return []benchCall{
		{name: "floodgate's function (FCALL, as the store runs it), one token-bucket decision", lib: fgLib, fn: fgFn, args: fnArgs, stat: "fcall"},
		{name: "minimal Lua fixed window (INCRBY, PEXPIRE when new)", stat: "evalsha",
			src:  "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) if n == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return n",
			args: []string{"1", "mfw:{bench__rand_int__}", "1", "60000"}},
		{name: "floodgate's script by EVALSHA (the fallback before Redis 7), one token-bucket decision", src: fgSrc, args: fgArgs, stat: "evalsha"},
		{name: "bare EVALSHA of return redis.call('INCR', KEYS[1])", stat: "evalsha",
			src: "return redis.call('INCR', KEYS[1])", args: []string{"1", "incr:{bench__rand_int__}"}},
		{name: "INCR", args: []string{"INCR", "incr:{bench__rand_int__}"}, stat: "incr"},
	}
}

// benchFigures is one redis-benchmark run's result.
type benchFigures struct {
	shown     string  // the command, the script's SHA abbreviated
	perSec    float64 // calls/s redis-benchmark reports
	cpuUs     float64 // Redis CPU (INFO cpu) per call, µs
	usPerCall float64 // INFO commandstats usec per call of the command
}

// runBench loads b's script, checks that one call succeeds, and runs
// redis-benchmark on it: clients connections, pipeline calls in flight on
// each, requests calls over 10,000 random keys.
func runBench(ctx context.Context, addr string, c *redis.Client, b benchCall, clients, pipeline, requests int) (benchFigures, error) {
	cmdArgs, shownArgs := b.args, printable(b.args)
	if b.lib != "" {
		if err := c.FunctionLoad(ctx, b.lib).Err(); err != nil && !strings.Contains(err.Error(), "already exists") {
			return benchFigures{}, err
		}
		cmdArgs = append([]string{"FCALL", b.fn}, b.args...)
		shownArgs = append([]string{"FCALL", b.fn}, printable(b.args)...)
	}
	if b.src != "" {
		sum := sha1.Sum([]byte(b.src))
		sha := hex.EncodeToString(sum[:])
		if err := c.ScriptLoad(ctx, b.src).Err(); err != nil {
			return benchFigures{}, err
		}
		cmdArgs = append([]string{"EVALSHA", sha}, b.args...)
		shownArgs = append([]string{"EVALSHA", "<" + sha[:8] + ">"}, printable(b.args)...)
	}
	one := make([]any, len(cmdArgs))
	for i, a := range cmdArgs {
		one[i] = strings.ReplaceAll(a, "__rand_int__", "probe")
	}
	if err := c.Do(ctx, one...).Err(); err != nil {
		return benchFigures{}, fmt.Errorf("%s answers an error: %w", b.name, err)
	}
	host, port, _ := net.SplitHostPort(addr)
	opts := []string{"-c", strconv.Itoa(clients), "-n", strconv.Itoa(requests), "-r", "10000", "-P", strconv.Itoa(pipeline)}
	f := benchFigures{shown: "redis-benchmark " + strings.Join(opts, " ") + " " + strings.Join(shownArgs, " ")}
	before, err := readRedisStats(ctx, c)
	if err != nil {
		return f, err
	}
	outb, err := exec.CommandContext(ctx, "redis-benchmark", append(append([]string{"-h", host, "-p", port, "-q"}, opts...), cmdArgs...)...).CombinedOutput()
	if err != nil {
		return f, fmt.Errorf("%v: %s", err, outb)
	}
	after, err := readRedisStats(ctx, c)
	if err != nil {
		return f, err
	}
	if f.perSec, err = parseBenchRate(string(outb)); err != nil {
		return f, err
	}
	calls := after.cmds[b.stat].calls - before.cmds[b.stat].calls
	if calls > 0 {
		f.cpuUs = (after.cpu - before.cpu) * 1e6 / float64(calls)
		f.usPerCall = (after.cmds[b.stat].usec - before.cmds[b.stat].usec) / float64(calls)
	}
	return f, nil
}

// parseBenchRate reads the rate of `redis-benchmark -q`'s last line,
// "EVALSHA ...: 41152.26 requests per second, p50=0.503 msec".
func parseBenchRate(text string) (float64, error) {
	if i := strings.LastIndex(text, ": "); i >= 0 {
		fields := strings.Fields(text[i+2:])
		if len(fields) > 1 && fields[1] == "requests" {
			if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
				return v, nil
			}
		}
	}
	return 0, fmt.Errorf("cannot read redis-benchmark's output: %q", text)
}

// scriptCost prints the script-cost comparison: each call at pipeline 16,
// and floodgate's also at pipeline 1. It returns floodgate's calls/s and
// Redis CPU per call as ratios to the minimal script's (0 when not run).
func scriptCost(ctx context.Context, out io.Writer, addr string, c *redis.Client, clients, requests int) (rateRatio, cpuRatio float64) {
	fmt.Fprintln(out, "| call (one decision a call) | calls/s | Redis CPU/call | usec_per_call | calls/s vs minimal script | command |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---|")
	calls := scriptCalls()
	var figs []benchFigures
	for _, b := range calls {
		f, err := runBench(ctx, addr, c, b, clients, 16, requests)
		if err != nil {
			fmt.Fprintf(out, "\nredis-benchmark: %v\n", err)
			return 0, 0
		}
		figs = append(figs, f)
	}
	minimal := figs[1]
	for i, f := range figs {
		fmt.Fprintf(out, "| %s | %.0f | %.2f µs | %.2f µs | %.2f× | `%s` |\n", calls[i].name, f.perSec, f.cpuUs, f.usPerCall, f.perSec/minimal.perSec, f.shown)
	}
	if f, err := runBench(ctx, addr, c, calls[0], clients, 1, requests/2); err == nil {
		fmt.Fprintf(out, "| %s, pipeline 1 | %.0f | %.2f µs | %.2f µs | — | `%s` |\n", calls[0].name, f.perSec, f.cpuUs, f.usPerCall, f.shown)
	}
	fmt.Fprintln(out)
	if minimal.cpuUs > 0 {
		cpuRatio = figs[0].cpuUs / minimal.cpuUs
	}
	return figs[0].perSec / minimal.perSec, cpuRatio
}

// printable is args as a table shows them: an argument holding bytes
// outside printable ASCII (the packed ARGV of floodgate's script) becomes
// <N bytes>.
func printable(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		for j := 0; j < len(a); j++ {
			if a[j] < ' ' || a[j] > '~' {
				out[i] = "<" + strconv.Itoa(len(a)) + " bytes>"
				break
			}
		}
	}
	return out
}
