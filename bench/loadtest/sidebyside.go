package main

// The side-by-side mode (-reference): floodgate and envoyproxy/ratelimit
// on one redis-server, the same rules (the reference's format), the same
// generator and load, the servers alternating (reference, floodgate,
// reference, floodgate, … a round each), each row reporting the Redis CPU
// per request over its measured interval. The reference runs as it is
// deployed: its local cache of over-limit keys on, stats off.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/bench/internal/benchproc"
	"github.com/floodgate/floodgate/internal/loadgen"
)

// sbsDomain is the side-by-side mode's domain: one rule per descriptor
// key, a million a second (never denied), counted per value.
const sbsDomain = "sbs"

// sbsConfig is the rules in the reference's format, which floodgate reads
// unchanged; algorithm, when set, is added to each rule for floodgate.
func sbsConfig(algorithm string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "domain: %s\ndescriptors:\n", sbsDomain)
	for j := range 3 {
		fmt.Fprintf(&b, "  - key: %s\n    rate_limit:\n      unit: second\n      requests_per_unit: 1000000\n", loadgen.DescriptorKey(j))
		if algorithm != "" {
			fmt.Fprintf(&b, "      algorithm: %s\n", algorithm)
		}
	}
	return b.String()
}

// startReference starts envoyproxy/ratelimit's binary on redisAddr with
// the rules in dir/rl/config, and waits until its gRPC health serves.
func startReference(ctx context.Context, binary, dir, redisAddr string) (*proc, error) {
	var addrs [3]string
	for i := range addrs {
		a, err := benchproc.FreeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	port := func(a string) string { return a[strings.LastIndexByte(a, ':')+1:] }
	logf, err := os.Create(filepath.Join(dir, "reference.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+port(addrs[0]),
		"HOST=127.0.0.1", "PORT="+port(addrs[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+port(addrs[2]),
		"RUNTIME_ROOT="+dir, "RUNTIME_SUBDIRECTORY=rl", "RUNTIME_WATCH_ROOT=false",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr,
		"USE_STATSD=false", "LOCAL_CACHE_SIZE_IN_BYTES=1048576", "LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &proc{cmd: cmd, grpcAddr: addrs[0]}
	if err := p.waitServing(ctx, logf.Name(), "the reference", 30*time.Second); err != nil {
		return nil, err
	}
	return p, nil
}

// sbsLoad is one load of the side-by-side table.
type sbsLoad struct {
	name        string
	descriptors int
	concurrency int
}

var sbsLoads = []sbsLoad{
	{"1 descriptor, 50 callers", 1, 50},
	{"3 descriptors, 50 callers", 3, 50},
	{"1 descriptor, 1 caller", 1, 1},
}

// sideBySide runs the side-by-side mode with the reference binary ref:
// rounds rounds of every load on each server, alternating.
func (s settings) sideBySide(ctx context.Context, out io.Writer, ref string, rounds int) error {
	dir, err := os.MkdirTemp("", "floodgate-sbs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "rl", "config"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "rl", "config", "sbs.yaml"), []byte(sbsConfig("")), 0o644); err != nil {
		return err
	}
	rs, err := startRedis(ctx, dir)
	if err != nil {
		return err
	}
	defer rs.stop()
	rc := redis.NewClient(&redis.Options{Addr: rs.addr})
	defer rc.Close()

	type server struct {
		name  string
		start func() (*proc, error)
	}
	servers := []server{{"envoyproxy/ratelimit", func() (*proc, error) { return startReference(ctx, ref, dir, rs.addr) }}}
	for _, alg := range []string{"token_bucket", "fixed_window"} {
		cfg := filepath.Join(dir, "floodgate-"+alg+".yaml")
		if err := os.WriteFile(cfg, []byte(sbsConfig(alg)), 0o644); err != nil {
			return err
		}
		servers = append(servers, server{"floodgate, " + alg, func() (*proc, error) {
			return startFloodgate(ctx, s.binary, dir, "--config", cfg, "--redis-url", "redis://"+rs.addr, "--redis-timeout", redisTimeout)
		}})
	}
	fmt.Fprintf(out, "### Side by side with envoyproxy/ratelimit on one redis-server\n\n")
	fmt.Fprintf(out, "%v measured after %v warmup a run, %d keys, the servers alternating, %d rounds; the reference with its local cache on and stats off. Redis CPU per request (INFO cpu, all threads, over the measured interval).\n\n", s.duration, s.warmup, s.keys, rounds)
	fmt.Fprintln(out, "| load | round | server | requests/s | p50 | p99 | Redis CPU / request | Redis commands / request | errors |")
	fmt.Fprintln(out, "|---|---:|---|---:|---:|---:|---:|---:|---:|")
	cpu := map[string]map[string][]float64{} // load -> server -> Redis µs a request, one a round
	rate := map[string]map[string][]float64{}
	for round := 1; round <= rounds; round++ {
		for _, sv := range servers {
			p, err := sv.start()
			if err != nil {
				return err
			}
			for _, l := range sbsLoads {
				run := s
				run.concurrency = l.concurrency
				r, err := run.measureReport(ctx, target{fg: p, redis: []*redis.Client{rc}}, loadgen.Config{API: loadgen.APIRLS, Domain: sbsDomain, Descriptors: l.descriptors})
				if err != nil {
					p.stop()
					return fmt.Errorf("%s, %s: %w", sv.name, l.name, err)
				}
				fmt.Fprintf(out, "| %s | %d | %s | %.0f | %s | %s | %s | %.3f | %d |\n", l.name, round, sv.name, r.RequestsPerSec,
					us(r.LatencyUs.P50), us(r.LatencyUs.P99), cpuUs(r.Redis.CPUUs), r.Redis.CommandsPerDecision, r.Errors)
				if cpu[l.name] == nil {
					cpu[l.name], rate[l.name] = map[string][]float64{}, map[string][]float64{}
				}
				cpu[l.name][sv.name] = append(cpu[l.name][sv.name], r.Redis.CPUUs)
				rate[l.name][sv.name] = append(rate[l.name][sv.name], r.RequestsPerSec)
			}
			p.stop()
		}
	}
	fmt.Fprintf(out, "\nMedians of the rounds, floodgate ÷ the reference (Redis CPU per request: lower is better; throughput: higher is better):\n\n")
	fmt.Fprintln(out, "| load | server | Redis CPU / request | ÷ reference | requests/s | ÷ reference |")
	fmt.Fprintln(out, "|---|---|---:|---:|---:|---:|")
	for _, l := range sbsLoads {
		refCPU, refRate := median(cpu[l.name][servers[0].name]), median(rate[l.name][servers[0].name])
		for _, sv := range servers {
			c, r := median(cpu[l.name][sv.name]), median(rate[l.name][sv.name])
			fmt.Fprintf(out, "| %s | %s | %s | %.2f× | %.0f | %.2f× |\n", l.name, sv.name, cpuUs(c), c/refCPU, r, r/refRate)
		}
	}
	fmt.Fprintln(out)
	return nil
}

// median is the median of v (the mean of the middle two for an even count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	w := append([]float64(nil), v...)
	sort.Float64s(w)
	if n := len(w); n%2 == 0 {
		return (w[n/2-1] + w[n/2]) / 2
	}
	return w[len(w)/2]
}
