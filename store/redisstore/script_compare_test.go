package redisstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
)

// Environment of TestScriptCostAgainstBase.
const (
	// scriptBaseEnv names a directory holding another version's lua/*.lua,
	// e.g. git archive <rev> store/redisstore/lua | tar -x -C /tmp/base,
	// or is baseEvalSha: this tree's script by EVALSHA against its library
	// by FCALL.
	scriptBaseEnv = "FLOODGATE_SCRIPT_BASE"
	// baseEvalSha as scriptBaseEnv compares EVALSHA with FCALL.
	baseEvalSha = "evalsha"
	// scriptAlgEnv is the algorithm decided (default token_bucket).
	scriptAlgEnv = "FLOODGATE_SCRIPT_ALG"
	// scriptRoundsEnv is how many interleaved rounds run (default 3).
	scriptRoundsEnv = "FLOODGATE_SCRIPT_ROUNDS"
	// scriptCallsEnv is how many script calls a round makes (default 8000).
	scriptCallsEnv = "FLOODGATE_SCRIPT_CALLS"
	// redisAddrEnv is a Redis to use instead of starting one.
	redisAddrEnv = "FLOODGATE_REDIS_ADDR"
	// callgrindEnv is "<pid>:<out prefix>" of a redis-server at
	// redisAddrEnv run under valgrind --tool=callgrind
	// --callgrind-out-file=<out prefix>.%p: the test then counts the
	// instructions Redis ran, which the machine's load does not move.
	callgrindEnv = "FLOODGATE_CALLGRIND"
)

// TestScriptCostAgainstBase compares this tree's decision script with
// another version's (scriptBaseEnv), interleaved in one run on one Redis:
// 16-deep pipelines over 1,000 keys at Redis' TIME, 1 or 8 requests a call
// (8 as the batcher merges concurrent calls), limits of 100/min (1,000/min
// for the log); with scriptBaseEnv=evalsha, this tree's script by
// EVALSHA ("base") against its function library by FCALL ("this"). It
// reports Redis CPU per decision from INFO cpu, or
// instructions per decision under callgrind (callgrindEnv). Skipped unless
// scriptBaseEnv is set; bench/RESULTS.md (round 3) has its
// figures.
func TestScriptCostAgainstBase(t *testing.T) {
	dir := os.Getenv(scriptBaseEnv)
	if dir == "" {
		t.Skipf("%s not set", scriptBaseEnv)
	}
	alg := algorithms.TokenBucket
	if name := os.Getenv(scriptAlgEnv); name != "" {
		var err error
		if alg, err = algorithms.ParseAlgorithm(name); err != nil {
			t.Fatal(err)
		}
	}
	rounds, calls := envInt(t, scriptRoundsEnv, 3), envInt(t, scriptCallsEnv, 8000)
	var c *redis.Client
	if addr := os.Getenv(redisAddrEnv); addr != "" {
		c = redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	} else {
		c = redistest.StartServer(t).Client()
	}
	unit, measure := "redis-cpu-us", func() float64 { return redisCPU(t, c) * 1e6 }
	if cg := os.Getenv(callgrindEnv); cg != "" {
		pid, prefix, _ := strings.Cut(cg, ":")
		var total float64 // callgrind counts from its last dump
		unit, measure = "instructions", func() float64 { total += callgrindDump(t, pid, prefix); return total }
	}
	base := func(names ...string) string {
		var sb strings.Builder
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(dir, n+".lua"))
			if err != nil {
				t.Fatal(err)
			}
			sb.Write(b)
		}
		return sb.String()
	}
	l := algorithms.Limit{Algorithm: alg, Requests: 100, Period: time.Minute}
	log := alg == algorithms.SlidingWindowLog
	if log {
		l.Requests = 1000
	}
	evalsha := func(sc *redis.Script) scriptSender {
		return scriptSender{
			load: func(ctx context.Context) error { return sc.Load(ctx, c).Err() },
			send: func(ctx context.Context, p redis.Pipeliner, keys []string, buf []byte) { sc.EvalSha(ctx, p, keys, buf) },
		}
	}
	scripts := map[string]scriptSender{}
	if dir == baseEvalSha {
		lib := newLibrary()
		scripts["base"] = evalsha(redis.NewScript(leanScript()))
		if log {
			scripts["base"] = evalsha(redis.NewScript(fullScript()))
		}
		scripts["this"] = scriptSender{
			load: func(ctx context.Context) error { return lib.load(ctx, c) },
			send: func(ctx context.Context, p redis.Pipeliner, keys []string, buf []byte) {
				p.FCall(ctx, lib.function(log), keys, buf)
			},
		}
	} else {
		common := []string{"lib", "token_bucket", "sliding_window", "fixed_window", "counter"}
		scripts["base"] = evalsha(redis.NewScript(base(append(common, "lean")...)))
		scripts["this"] = evalsha(redis.NewScript(leanScript()))
		if log {
			scripts["base"] = evalsha(redis.NewScript(base(append(common, "sliding_window_log", "batch")...)))
			scripts["this"] = evalsha(redis.NewScript(fullScript()))
		}
	}
	const nkeys = 1000
	ctx := context.Background()
	sum := map[string]float64{}
	for range rounds {
		for _, per := range []int{1, 8} {
			for _, name := range []string{"base", "this"} {
				sc := scripts[name]
				if err := c.FlushAll(ctx).Err(); err != nil { // our own server
					t.Fatal(err)
				}
				if err := sc.load(ctx); err != nil {
					t.Fatal(err)
				}
				run := func(n int) {
					for i := 0; i < n; {
						p := c.Pipeline()
						for d := 0; d < 16 && i < n; d, i = d+1, i+1 {
							names := make([]string, per)
							buf := appendHeader(nil, header{nowMs: -1})
							for j := range names {
								names[j] = stateKey(DefaultPrefix, alg, hashTag(fmt.Sprintf("kbench%d", (i*per+j)%nkeys)), "")
								buf = appendRequest(buf, l, 1, false, 0)
							}
							sc.send(ctx, p, names, buf)
						}
						if _, err := p.Exec(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
				run(nkeys / per) // every key holds a state
				m0 := measure()
				run(calls)
				sum[fmt.Sprintf("%s/%d", name, per)] += (measure() - m0) / float64(calls*per)
			}
		}
	}
	for _, per := range []int{1, 8} {
		b, n := sum[fmt.Sprintf("base/%d", per)]/float64(rounds), sum[fmt.Sprintf("this/%d", per)]/float64(rounds)
		t.Logf("%s, %d a call: base %.2f, this %.2f %s/decision (this/base %.2f)", alg, per, b, n, unit, n/b)
	}
}

// scriptSender loads a script (or library) on the test's Redis and
// queues one call of it.
type scriptSender struct {
	load func(ctx context.Context) error
	send func(ctx context.Context, p redis.Pipeliner, keys []string, buf []byte)
}

// envInt reads a positive integer from the environment, def if unset.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// callgrindDump has callgrind dump (and zero) the counters of the
// redis-server pid and returns the instructions it ran since the last
// dump, from the newest <prefix>.<pid>.<n> file.
func callgrindDump(t *testing.T, pid, prefix string) float64 {
	if out, err := exec.Command("callgrind_control", "-d", pid).CombinedOutput(); err != nil {
		t.Fatalf("callgrind_control: %v: %s", err, out)
	}
	files, _ := filepath.Glob(prefix + "." + pid + ".*")
	newest, last := "", -1
	for _, f := range files {
		if n, err := strconv.Atoi(f[strings.LastIndex(f, ".")+1:]); err == nil && n > last {
			newest, last = f, n
		}
	}
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "totals: "); ok {
			f, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no totals in %s", newest)
	return 0
}
