// Command loadtest runs floodgate's whole-service load tests (`make
// loadtest`) and prints the tables of bench/RESULTS.md: the built binary
// against the embedded store and against a redis-server it starts, driven
// by the same closed-loop generator as `floodgate bench`
// (internal/loadgen), each figure next to the same server's bare gRPC
// ceiling (grpc.health.v1 Check) measured in the same run with the same
// settings.
//
//	go run ./bench/loadtest [-duration 10s] [-warmup 2s] [-binary bin/floodgate]
//
// Everything listens on 127.0.0.1 only, and every process it starts is
// stopped when it ends.
package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/loadgen"
	"github.com/floodgate/floodgate/store/redisstore"
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
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var s settings
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.DurationVar(&s.duration, "duration", 10*time.Second, "measured time per run")
	fs.DurationVar(&s.warmup, "warmup", 2*time.Second, "unmeasured warmup per run")
	fs.StringVar(&s.binary, "binary", "bin/floodgate", "the floodgate binary to test")
	fs.IntVar(&s.concurrency, "concurrency", 50, "closed-loop workers")
	fs.IntVar(&s.keys, "keys", 10_000, "distinct keys")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "floodgate-loadtest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// The rules: domain bench (3 descriptors, generous token buckets) and
	// domain denied (10 per second: with 10 keys nearly every request is
	// over the limit).
	generous := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1_000_000, Period: time.Second}
	tight := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second}
	cfgDir := filepath.Join(dir, "config")
	if err := os.Mkdir(cfgDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "bench.yaml"), []byte(loadgen.RLSConfig("bench", 3, generous)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "denied.yaml"), []byte(loadgen.RLSConfig("denied", 1, tight)), 0o644); err != nil {
		return err
	}

	fmt.Fprintf(out, "Machine: %d CPUs, %s/%s, %s; %s. Settings: %d workers, 1 connection, %v measured after %v warmup, %d keys (uniform).\n\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.Version(), s.concurrency, s.duration, s.warmup, s.keys)

	// Embedded store.
	mem, err := startFloodgate(ctx, s.binary, dir, "--config", cfgDir)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "### Embedded store")
	fmt.Fprintln(out)
	table(out)
	ceiling, err := s.measure(ctx, mem, "health (ceiling)", loadgen.Config{API: loadgen.APIHealth}, 0, out)
	if err == nil {
		_, err = s.measure(ctx, mem, "Check, token bucket", loadgen.Config{API: loadgen.APICheck, Limit: generous}, ceiling, out)
	}
	if err == nil {
		_, err = s.measure(ctx, mem, "ShouldRateLimit, 1 descriptor", loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 1}, ceiling, out)
	}
	if err == nil {
		_, err = s.measure(ctx, mem, "ShouldRateLimit, 3 descriptors", loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 3}, ceiling, out)
	}
	mem.stop()
	if err != nil {
		return err
	}
	fmt.Fprintln(out)

	// Redis.
	rs, err := startRedis(ctx, dir)
	if err != nil {
		return err
	}
	defer rs.stop()
	rc := redis.NewClient(&redis.Options{Addr: rs.addr})
	defer rc.Close()
	fg, err := startFloodgate(ctx, s.binary, dir, "--config", cfgDir, "--redis-url", "redis://"+rs.addr)
	if err != nil {
		return err
	}
	defer fg.stop()
	fmt.Fprintln(out, "### Redis (one local redis-server, default batching)")
	fmt.Fprintln(out)
	table(out)
	ceiling, err = s.measure(ctx, fg, "health (ceiling)", loadgen.Config{API: loadgen.APIHealth}, 0, out)
	if err != nil {
		return err
	}
	for _, r := range []struct {
		name string
		cfg  loadgen.Config
	}{
		{"Check, token bucket", loadgen.Config{API: loadgen.APICheck, Limit: generous}},
		{"ShouldRateLimit, 1 descriptor", loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 1}},
		{"ShouldRateLimit, 3 descriptors", loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 3}},
	} {
		if _, err := s.measure(ctx, fg, r.name, r.cfg, ceiling, out); err != nil {
			return err
		}
	}
	// Mostly denied: 10 keys at 10/s. How busy is Redis meanwhile?
	before, err := redisStats(ctx, rc)
	if err != nil {
		return err
	}
	denied := s
	denied.keys = 10
	rep, err := denied.measureReport(ctx, fg, loadgen.Config{API: loadgen.APIRLS, Domain: "denied", Descriptors: 1})
	if err != nil {
		return err
	}
	after, err := redisStats(ctx, rc)
	if err != nil {
		return err
	}
	row(out, "ShouldRateLimit, mostly denied (10 keys at 10/s)", rep, ceiling)
	// One worker: the latency of a lone caller.
	lone := s
	lone.concurrency = 1
	rep1, err := lone.measureReport(ctx, fg, loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 1})
	if err != nil {
		return err
	}
	row(out, "ShouldRateLimit, 1 worker", rep1, ceiling)
	fmt.Fprintln(out)
	total := rep.Allowed + rep.Denied
	fmt.Fprintf(out, "Mostly denied: %.1f%% of %d decisions denied; Redis ran %d scripts for them (%.2f per decision, the rest answered by the deny cache) and used %.2fs of CPU in %.0fs (%.1f%% of a core).\n\n",
		100*float64(rep.Denied)/float64(max(rep.Allowed+rep.Denied, 1)), total, after.scripts-before.scripts,
		float64(after.scripts-before.scripts)/float64(max(total, 1)), after.cpu-before.cpu, rep.Seconds, 100*(after.cpu-before.cpu)/rep.Seconds)

	// Memory per token-bucket key in Redis: 1,000 keys of a slow limit
	// (100 per hour), so they live long enough to be measured.
	slow := s
	slow.keys, slow.concurrency, slow.duration, slow.warmup = 1000, 10, 0, 0
	if _, err := slow.measureReport(ctx, fg, loadgen.Config{API: loadgen.APICheck, MaxRequests: 3000,
		Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Hour}}); err != nil {
		return err
	}
	usage, n, err := memoryPerKey(ctx, rc, "fg:tb:{k*", 200)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Redis `MEMORY USAGE` per token-bucket key (Check API keys `fg:tb:{k<key>}`, 100/h): %.1f bytes (mean of %d keys).\n\n", usage, n)
	fg.stop()

	// Batching: the same run without the batcher, then redis-benchmark
	// running the same script with EVALSHA.
	fmt.Fprintln(out, "### Redis: batching, and redis-benchmark on the same script")
	fmt.Fprintln(out)
	table(out)
	for _, b := range []struct {
		name string
		args []string
	}{
		{"ShouldRateLimit, 1 descriptor, batching on (2 pipelines, up to 64 calls)", nil},
		{"ShouldRateLimit, 1 descriptor, batching off", []string{"--redis-batch-max-size", "1"}},
	} {
		p, err := startFloodgate(ctx, s.binary, dir, append([]string{"--config", cfgDir, "--redis-url", "redis://" + rs.addr}, b.args...)...)
		if err != nil {
			return err
		}
		c, err := s.measure(ctx, p, "health (ceiling)", loadgen.Config{API: loadgen.APIHealth}, 0, io.Discard)
		if err == nil {
			_, err = s.measure(ctx, p, b.name, loadgen.Config{API: loadgen.APIRLS, Domain: "bench", Descriptors: 1}, c, out)
		}
		p.stop()
		if err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	for _, pipeline := range []int{1, 16} {
		rps, cmd, err := redisBenchmark(ctx, rs, rc, s.concurrency, pipeline)
		if err != nil {
			fmt.Fprintf(out, "redis-benchmark: %v\n", err)
			break
		}
		fmt.Fprintf(out, "- `%s`: %.0f scripts/s\n", cmd, rps)
	}
	fmt.Fprintln(out)
	return nil
}

// ---- measuring

// result is one run's figures.
type result struct {
	loadgen.Report
	Seconds float64
}

func table(out io.Writer) {
	fmt.Fprintln(out, "| run | decisions/s | % of ceiling | allowed | denied | errors | p50 | p90 | p99 | p99.9 | max |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
}

func row(out io.Writer, name string, r result, ceiling float64) {
	pct := "—"
	if ceiling > 0 {
		pct = fmt.Sprintf("%.0f%%", 100*r.RequestsPerSec/ceiling)
	}
	l := r.LatencyUs
	fmt.Fprintf(out, "| %s | %.0f | %s | %d | %d | %d | %s | %s | %s | %s | %s |\n",
		name, r.RequestsPerSec, pct, r.Allowed, r.Denied, r.Errors, us(l.P50), us(l.P90), us(l.P99), us(l.P999), us(l.Max))
}

func us(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f ms", v/1000)
	}
	return fmt.Sprintf("%.0f µs", v)
}

// measure runs one load and prints its row; it returns requests/s.
func (s settings) measure(ctx context.Context, p *proc, name string, cfg loadgen.Config, ceiling float64, out io.Writer) (float64, error) {
	r, err := s.measureReport(ctx, p, cfg)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	row(out, name, r, ceiling)
	return r.RequestsPerSec, nil
}

func (s settings) measureReport(ctx context.Context, p *proc, cfg loadgen.Config) (result, error) {
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return result{}, err
	}
	defer conn.Close()
	cfg.Conns = []grpc.ClientConnInterface{conn}
	cfg.Concurrency = s.concurrency
	cfg.Duration = s.duration
	cfg.Warmup = s.warmup
	cfg.Keys = s.keys
	cfg.Target = p.grpcAddr
	res, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return result{}, err
	}
	rep := res.Report()
	if rep.Errors > 0 {
		return result{}, fmt.Errorf("%d errors: %v", rep.Errors, rep.ErrorsByCode)
	}
	return result{Report: rep, Seconds: rep.ElapsedSeconds}, nil
}

// ---- processes

type proc struct {
	cmd      *exec.Cmd
	grpcAddr string
	addr     string
}

func (p *proc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startFloodgate(ctx context.Context, binary, dir string, args ...string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "floodgate-"+strconv.Itoa(time.Now().Nanosecond())+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, append([]string{"serve", "--grpc-addr", addr, "--http-addr", "", "--log-level", "warn"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &proc{cmd: cmd, grpcAddr: addr}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.stop()
		return nil, err
	}
	defer conn.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			log, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("floodgate did not start: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func startRedis(ctx context.Context, dir string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server (make loadtest installs it): %w", err)
	}
	p := &proc{cmd: cmd, addr: addr}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := c.Ping(ctx).Err(); err == nil {
			return p, nil
		} else if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("redis-server did not start: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---- Redis figures

type stats struct {
	scripts int64   // evalsha + eval calls
	cpu     float64 // used_cpu_user + used_cpu_sys, seconds
}

func redisStats(ctx context.Context, c *redis.Client) (stats, error) {
	info, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return stats{}, err
	}
	var s stats
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "cmdstat_evalsha:"), strings.HasPrefix(line, "cmdstat_eval:"):
			for _, f := range strings.Split(strings.SplitN(line, ":", 2)[1], ",") {
				if v, ok := strings.CutPrefix(f, "calls="); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					s.scripts += n
				}
			}
		case strings.HasPrefix(line, "used_cpu_user:"), strings.HasPrefix(line, "used_cpu_sys:"):
			v, _ := strconv.ParseFloat(strings.SplitN(line, ":", 2)[1], 64)
			s.cpu += v
		}
	}
	return s, nil
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

// redisBenchmark runs redis-benchmark on the decision script with
// EVALSHA, one token-bucket request per call, exactly as floodgate sends it
// (redisstore.BenchmarkEval: its ARGV holds no NUL byte, so it travels on
// the command line).
func redisBenchmark(ctx context.Context, rs *proc, c *redis.Client, clients, pipeline int) (float64, string, error) {
	src, argv := redisstore.BenchmarkEval(algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1_000_000, Period: time.Second}, 1)
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	if err := c.ScriptLoad(ctx, src).Err(); err != nil {
		return 0, "", err
	}
	host, port, _ := net.SplitHostPort(rs.addr)
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(clients), "-n", "200000", "-r", "10000", "-P", strconv.Itoa(pipeline), "-q",
		"EVALSHA", sha, "1", "fg:tb:{kbench__rand_int__}", argv}
	cmd := exec.CommandContext(ctx, "redis-benchmark", args...)
	outb, err := cmd.CombinedOutput()
	shown := "redis-benchmark -c " + strconv.Itoa(clients) + " -n 200000 -r 10000 -P " + strconv.Itoa(pipeline) + " EVALSHA <lean script> 1 fg:tb:{kbench__rand_int__} <one token-bucket request, 1e6/s, cost 1: redisstore.BenchmarkEval>"
	if err != nil {
		return 0, shown, fmt.Errorf("%v: %s", err, outb)
	}
	// "EVALSHA ...: 41152.26 requests per second, p50=..."
	text := string(outb)
	if i := strings.LastIndex(text, ": "); i >= 0 {
		fields := strings.Fields(text[i+2:])
		if len(fields) > 0 {
			v, err := strconv.ParseFloat(fields[0], 64)
			if err == nil {
				return v, shown, nil
			}
		}
	}
	return 0, shown, fmt.Errorf("cannot read redis-benchmark's output: %q", text)
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
