// Command loadtest runs floodgate's whole-service load tests (`make
// loadtest`) and prints the tables of bench/RESULTS.md and
// docs/capacity.md: the built binary against the embedded store, against a
// redis-server it starts and against a three-master Redis Cluster it
// starts, driven by the same closed-loop generator as `floodgate bench`
// (internal/loadgen), each figure next to the same server's bare gRPC
// ceiling (grpc.health.v1 Check) measured in the same run with the same
// settings.
//
// Besides rates and latencies, each run prints CPU per decision over its
// measured interval only (not the warmup): floodgate's (/proc/<pid>/stat),
// the generator's, and Redis' (INFO cpu, summed over the masters), with
// the script calls per decision (INFO commandstats). redis-benchmark then
// compares floodgate's script for one decision with a minimal Lua fixed
// window, a bare EVALSHA and INCR, and the run ends with the performance goals
// and the capacity table computed from these figures.
//
//	cd bench && go run ./loadtest [-duration 10s] [-warmup 2s] [-binary ../bin/floodgate] [-cluster=false]
//	cd bench && go run ./loadtest -reference PATH [-rounds 2]   (side by side with envoyproxy/ratelimit)
//
// Everything listens on 127.0.0.1 only, and every process it starts is
// stopped when it ends.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/loadgen"
)

func main() {
	// As `floodgate bench` does: the generator's heap is tiny, so collect
	// rarely and leave the CPU to the server under test.
	debug.SetGCPercent(400)
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

type settings struct {
	duration, warmup time.Duration
	binary           string
	concurrency      int
	keys             int
	cluster          bool
}

// algo is one algorithm's rows: its RLS domain (a config file of its own)
// and the limit of its Check requests and rules.
type algo struct {
	name   string
	domain string
	limit  algorithms.Limit
}

// The limits: generous (never denied) for the counters; the sliding window
// log at a typical size, 1,000 per 10 s, so a key's log holds the units of
// its last 10 s: rate ÷ keys × 10 s units, which the run prints (5–30 at
// 5,000–30,000 decisions/s over 10,000 keys).
var (
	generous = func(a algorithms.Algorithm) algorithms.Limit {
		return algorithms.Limit{Algorithm: a, Requests: 1_000_000, Period: time.Second}
	}
	logLimit = algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 1000, Period: 10 * time.Second}
	algos    = []algo{
		{"token bucket", "bench", generous(algorithms.TokenBucket)},
		{"sliding window", "bench_sw", generous(algorithms.SlidingWindow)},
		{"fixed window", "bench_fw", generous(algorithms.FixedWindow)},
		{"sliding window log", "bench_swl", logLimit},
	}
	tight = algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second}
)

// redisTimeout is floodgate's --redis-timeout here. The default (50 ms)
// fires on a shared two-core box under this load, and a decision answered
// by the failure mode costs Redis nothing; the load test measures cost, so
// it waits longer, and counts the degraded decisions that remain (the
// errors column).
const redisTimeout = "2s"

func run(ctx context.Context, args []string, out io.Writer) error {
	var s settings
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.DurationVar(&s.duration, "duration", 10*time.Second, "measured time per run")
	fs.DurationVar(&s.warmup, "warmup", 2*time.Second, "unmeasured warmup per run")
	fs.StringVar(&s.binary, "binary", "../bin/floodgate", "the floodgate binary to test (make build writes bin/floodgate)")
	fs.IntVar(&s.concurrency, "concurrency", 50, "closed-loop workers")
	fs.IntVar(&s.keys, "keys", 10_000, "distinct keys")
	fs.BoolVar(&s.cluster, "cluster", true, "also measure a three-master Redis Cluster")
	reference := fs.String("reference", "", "an envoyproxy/ratelimit binary: run only the side-by-side mode, it and floodgate alternating on one redis-server")
	rounds := fs.Int("rounds", 2, "rounds of the side-by-side mode")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *reference != "" {
		if *rounds < 1 {
			return fmt.Errorf("-rounds %d: want at least 1", *rounds)
		}
		fmt.Fprintf(out, "Machine: %d CPUs, %s/%s, %s; %s; load average %s at the start.\n\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.Version(), loadAvg())
		if err := s.sideBySide(ctx, out, *reference, *rounds); err != nil {
			return err
		}
		fmt.Fprintf(out, "Load average at the end: %s.\n", loadAvg())
		return nil
	}
	dir, err := os.MkdirTemp("", "floodgate-loadtest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgDir := filepath.Join(dir, "config")
	if err := os.Mkdir(cfgDir, 0o755); err != nil {
		return err
	}
	for _, a := range algos {
		if err := os.WriteFile(filepath.Join(cfgDir, a.domain+".yaml"), []byte(loadgen.RLSConfig(a.domain, 3, a.limit)), 0o644); err != nil {
			return err
		}
	}
	// Domain denied: 10 per second, so with 10 keys nearly every request
	// is over the limit.
	if err := os.WriteFile(filepath.Join(cfgDir, "denied.yaml"), []byte(loadgen.RLSConfig("denied", 1, tight)), 0o644); err != nil {
		return err
	}

	fmt.Fprintf(out, "Machine: %d CPUs, %s/%s, %s; %s; load average %s at the start. Settings: %d workers, 1 connection, %v measured after %v warmup, %d keys (uniform). CPU columns: per decision over the measured interval only.\n\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.Version(), loadAvg(), s.concurrency, s.duration, s.warmup, s.keys)

	f := figures{}
	if err := s.embedded(ctx, out, cfgDir, dir, &f); err != nil {
		return err
	}
	rs, err := startRedis(ctx, dir)
	if err != nil {
		return err
	}
	defer rs.stop()
	rc := redis.NewClient(&redis.Options{Addr: rs.addr})
	defer rc.Close()
	if err := s.standalone(ctx, out, cfgDir, dir, rs, rc, &f); err != nil {
		return err
	}
	if err := s.batching(ctx, out, cfgDir, dir, rs, rc, &f); err != nil {
		return err
	}
	if s.cluster {
		if err := s.clusterCheck(ctx, out, cfgDir, dir, &f); err != nil {
			return err
		}
	}
	f.printGoals(out)
	fmt.Fprintln(out, "### Capacity (docs/capacity.md)")
	fmt.Fprintln(out)
	defaultPlan.printCapacity(out, f.shapes())
	f.printHotKey(out, defaultPlan)
	fmt.Fprintf(out, "Load average at the end: %s.\n", loadAvg())
	return nil
}

// embedded measures the embedded store.
func (s settings) embedded(ctx context.Context, out io.Writer, cfgDir, dir string, f *figures) error {
	mem, err := startFloodgate(ctx, s.binary, dir, "--config", cfgDir)
	if err != nil {
		return err
	}
	defer mem.stop()
	t := target{fg: mem}
	fmt.Fprintln(out, "### Embedded store")
	fmt.Fprintln(out)
	table(out)
	rows := []struct {
		name string
		cfg  loadgen.Config
		dst  *result
	}{
		{"health (ceiling)", loadgen.Config{API: loadgen.APIHealth}, &f.memCeiling},
		{"Check, token bucket", loadgen.Config{API: loadgen.APICheck, Limit: generous(algorithms.TokenBucket)}, &f.mem[0]},
		{"ShouldRateLimit, 1 descriptor", loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 1}, &f.mem[1]},
		{"ShouldRateLimit, 3 descriptors", loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 3}, &f.mem[2]},
	}
	for _, r := range rows {
		res, err := s.measure(ctx, t, r.name, r.cfg, f.memCeiling.RequestsPerSec, out)
		if err != nil {
			return err
		}
		*r.dst = res
	}
	fmt.Fprintln(out)
	return nil
}

// shapes are the three request shapes of every algorithm's rows.
var shapes = []struct {
	name string
	cfg  func(a algo) loadgen.Config
}{
	{"Check", func(a algo) loadgen.Config { return loadgen.Config{API: loadgen.APICheck, Limit: a.limit} }},
	{"ShouldRateLimit, 1 descriptor", func(a algo) loadgen.Config {
		return loadgen.Config{API: loadgen.APIRLS, Domain: a.domain, Descriptors: 1}
	}},
	{"ShouldRateLimit, 3 descriptors", func(a algo) loadgen.Config {
		return loadgen.Config{API: loadgen.APIRLS, Domain: a.domain, Descriptors: 3}
	}},
}

// standalone measures one redis-server: every algorithm in every shape,
// mostly denied, a hot key, one worker, and memory per key.
func (s settings) standalone(ctx context.Context, out io.Writer, cfgDir, dir string, rs *proc, rc *redis.Client, f *figures) error {
	fg, err := startFloodgate(ctx, s.binary, dir, "--config", cfgDir, "--redis-url", "redis://"+rs.addr, "--redis-timeout", redisTimeout)
	if err != nil {
		return err
	}
	defer fg.stop()
	t := target{fg: fg, redis: []*redis.Client{rc}}
	fmt.Fprintln(out, "### Redis (one local redis-server, default batching)")
	fmt.Fprintln(out)
	table(out)
	if f.redisCeiling, err = s.measure(ctx, t, "health (ceiling)", loadgen.Config{API: loadgen.APIHealth}, 0, out); err != nil {
		return err
	}
	c := f.redisCeiling.RequestsPerSec
	for i, a := range algos {
		for j, sh := range shapes {
			if f.redis[i][j], err = s.measure(ctx, t, sh.name+", "+a.name, sh.cfg(a), c, out); err != nil {
				return err
			}
		}
	}
	denied := s
	denied.keys = 10
	if f.denied, err = denied.measure(ctx, t, "ShouldRateLimit, mostly denied (10 keys at 10/s)", loadgen.Config{API: loadgen.APIRLS, Domain: "denied", Descriptors: 1}, c, out); err != nil {
		return err
	}
	hot := s
	hot.keys = 1
	if f.hot, err = hot.measure(ctx, t, "ShouldRateLimit, 1 descriptor, one hot key (never denied)", loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 1}, c, out); err != nil {
		return err
	}
	lone := s
	lone.concurrency = 1
	if f.lone, err = lone.measure(ctx, t, "ShouldRateLimit, 1 descriptor, 1 worker", loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 1}, c, out); err != nil {
		return err
	}
	fmt.Fprintln(out)
	log := f.redis[3][1]
	fmt.Fprintf(out, "Sliding window log (1,000 per 10 s): at %.0f decisions/s over %d keys a key's log holds about %.0f units in steady state (rate ÷ keys × 10 s).\n\n",
		log.DecisionsPerS, s.keys, log.DecisionsPerS/float64(s.keys)*10)
	d := f.denied
	fmt.Fprintf(out, "Mostly denied: %.1f%% of %d decisions denied; Redis ran %.4f scripts per decision (the rest answered by the deny cache) and used %.1f%% of a core.\n\n",
		100*float64(d.Denied)/float64(max(d.Decisions, 1)), d.Decisions, d.Redis.CallsPerDecision, 100*d.Redis.Cores)

	// Memory per token-bucket key in Redis: 1,000 keys of a slow limit
	// (100 per hour), so they live long enough to be measured.
	slow := s
	slow.keys, slow.concurrency, slow.duration, slow.warmup = 1000, 10, 0, 0
	if _, err := slow.measureReport(ctx, target{fg: fg}, loadgen.Config{API: loadgen.APICheck, MaxRequests: 3000,
		Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Hour}}); err != nil {
		return err
	}
	usage, n, err := memoryPerKey(ctx, rc, "fg:tat:{k*", 200)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Redis `MEMORY USAGE` per token-bucket key (Check API keys `fg:tat:{k<key>}…`, 100/h): %.1f bytes (mean of %d keys).\n\n", usage, n)
	return nil
}

// batching measures ShouldRateLimit with 1 descriptor with the batcher on
// and off, each against its own ceiling.
func (s settings) batching(ctx context.Context, out io.Writer, cfgDir, dir string, rs *proc, rc *redis.Client, f *figures) error {
	fmt.Fprintln(out, "### Redis: batching")
	fmt.Fprintln(out)
	table(out)
	for _, b := range []struct {
		name string
		args []string
		dst  *result
	}{
		{"ShouldRateLimit, 1 descriptor, batching on (defaults)", nil, nil},
		{"ShouldRateLimit, 1 descriptor, batching off", []string{"--redis-batch-max-size", "1"}, &f.unbatched},
	} {
		p, err := startFloodgate(ctx, s.binary, dir, append([]string{"--config", cfgDir, "--redis-url", "redis://" + rs.addr, "--redis-timeout", redisTimeout}, b.args...)...)
		if err != nil {
			return err
		}
		t := target{fg: p, redis: []*redis.Client{rc}}
		c, err := s.measureReport(ctx, t, loadgen.Config{API: loadgen.APIHealth})
		var r result
		if err == nil {
			r, err = s.measure(ctx, t, b.name, loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 1}, c.RequestsPerSec, out)
		}
		p.stop()
		if err != nil {
			return err
		}
		if b.dst != nil {
			*b.dst = r
		}
	}
	fmt.Fprintln(out)
	return nil
}

// clusterCheck measures a three-master Redis Cluster with the same load,
// to check the capacity model: Redis CPU per decision summed over the
// masters, and how evenly they share it.
func (s settings) clusterCheck(ctx context.Context, out io.Writer, cfgDir, dir string, f *figures) error {
	cl, err := startCluster(ctx, dir, 3)
	if err != nil {
		return err
	}
	defer cl.stop()
	var nodes []*redis.Client
	for _, n := range cl.nodes {
		c := redis.NewClient(&redis.Options{Addr: n.addr})
		defer c.Close()
		nodes = append(nodes, c)
	}
	fg, err := startFloodgate(ctx, s.binary, dir, "--config", cfgDir, "--redis-mode", "cluster", "--redis-url", cl.url(), "--redis-timeout", redisTimeout)
	if err != nil {
		return err
	}
	defer fg.stop()
	t := target{fg: fg, redis: nodes}
	fmt.Fprintln(out, "### Redis Cluster, three masters (the capacity model's check)")
	fmt.Fprintln(out)
	table(out)
	if f.clusterCeiling, err = s.measure(ctx, t, "health (ceiling)", loadgen.Config{API: loadgen.APIHealth}, 0, out); err != nil {
		return err
	}
	for j := 1; j < 3; j++ {
		if f.cluster[j-1], err = s.measure(ctx, t, shapes[j].name+", token bucket", shapes[j].cfg(algos[0]), f.clusterCeiling.RequestsPerSec, out); err != nil {
			return err
		}
	}
	hot := s
	hot.keys = 1
	if f.clusterHot, err = hot.measure(ctx, t, "ShouldRateLimit, 1 descriptor, one hot key (never denied)", loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 1}, f.clusterCeiling.RequestsPerSec, out); err != nil {
		return err
	}
	if f.clusterHotDenied, err = hot.measure(ctx, t, "ShouldRateLimit, 1 descriptor, one hot key over its limit (10/s)", loadgen.Config{API: loadgen.APIRLS, Domain: "denied", Descriptors: 1}, f.clusterCeiling.RequestsPerSec, out); err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| ShouldRateLimit, token bucket | Redis CPU/decision: one server | one server, batching off (× descriptors) | 3 masters (sum) | busiest master's share | scripts/decision: one server / 3 masters | ÷ health ceiling: one server / 3 masters |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|")
	for j, name := range []string{"1 descriptor", "3 descriptors"} {
		one, three := f.redis[0][j+1], f.cluster[j]
		fmt.Fprintf(out, "| %s | %s | %s | %s | %.0f%% | %.3f / %.3f | %.2f / %.2f |\n", name, cpuUs(one.Redis.CPUUs), cpuUs(float64(2*j+1)*redisUs(f.unbatched)),
			cpuUs(three.Redis.CPUUs), 100*three.Redis.BusiestShare, one.Redis.CallsPerDecision, three.Redis.CallsPerDecision,
			ratio(one, f.redisCeiling), ratio(three, f.clusterCeiling))
	}
	fmt.Fprintln(out)
	return nil
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "unknown CPU"
}

// loadAvg is the 1, 5 and 15 minute load average, from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}
