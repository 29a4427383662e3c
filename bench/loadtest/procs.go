package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate/bench/internal/benchproc"
)

// proc is a process the load test started: floodgate or a redis-server.
type proc struct {
	cmd      *exec.Cmd
	grpcAddr string // floodgate
	httpAddr string // floodgate: /metrics
	addr     string // redis-server
}

func (p *proc) stop() { benchproc.Stop(p.cmd) }

// cpu is the CPU time (user + system) the process has used so far, from
// /proc/<pid>/stat (fields 14 and 15, in USER_HZ ticks: 100 a second on
// Linux). 0 and false where /proc does not say.
func (p *proc) cpu() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces; fields count from after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const userHZ = 100
	return time.Duration(utime+stime) * time.Second / userHZ, true
}

// degraded is the number of decisions floodgate answered by a failure
// mode (Redis slow or down, the breaker open) so far: the sum of
// floodgate_decisions_total{result="degraded"} on its /metrics.
func (p *proc) degraded(ctx context.Context) (float64, error) {
	if p.httpAddr == "" { // not floodgate: the side-by-side mode's reference
		return 0, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.httpAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return sumMetric(string(b), "floodgate_decisions_total", `result="degraded"`), nil
}

// sumMetric sums the samples of a Prometheus text exposition whose
// series is name and whose labels contain label.
func sumMetric(text, name, label string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(series, name+"{") || !strings.Contains(series, label) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			sum += v
		}
	}
	return sum
}

func startFloodgate(ctx context.Context, binary, dir string, args ...string) (*proc, error) {
	addr, err := benchproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := benchproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "floodgate-"+strconv.Itoa(time.Now().Nanosecond())+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(binary, append([]string{"serve", "--grpc-addr", addr, "--http-addr", httpAddr, "--log-level", "warn"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &proc{cmd: cmd, grpcAddr: addr, httpAddr: httpAddr}
	if err := p.waitServing(ctx, logf.Name(), "floodgate", 20*time.Second); err != nil {
		return nil, err
	}
	return p, nil
}

// startRedis starts a redis-server on a free loopback port, without
// persistence, with extra args (e.g. cluster mode), its files in dir.
func startRedis(ctx context.Context, dir string, extra ...string) (*proc, error) {
	cmd, addr, err := benchproc.StartRedis(ctx, nil, 10*time.Second, append([]string{"--dir", dir}, extra...)...)
	if err != nil {
		return nil, err
	}
	return &proc{cmd: cmd, addr: addr}, nil
}

// cluster is a Redis Cluster of masters only, started by startCluster.
// (internal/redistest does the same for tests; it needs a testing.TB.)
type cluster struct{ nodes []*proc }

func (c *cluster) stop() {
	for _, n := range c.nodes {
		n.stop()
	}
}

// url is the --redis-url naming every node.
func (c *cluster) url() string {
	u := "redis://" + c.nodes[0].addr
	for i, n := range c.nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + n.addr
	}
	return u
}

// startCluster starts masters cluster-enabled redis-servers (at least 3,
// redis-cli's minimum), joins them with `redis-cli --cluster create`, and
// waits until every node reports cluster_state:ok.
func startCluster(ctx context.Context, dir string, masters int) (*cluster, error) {
	c := &cluster{}
	for i := range masters {
		nd := filepath.Join(dir, "cluster-node-"+strconv.Itoa(i))
		if err := os.MkdirAll(nd, 0o755); err != nil {
			c.stop()
			return nil, err
		}
		n, err := startRedis(ctx, nd, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	for _, n := range c.nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.addr})
		for {
			info, err := cl.ClusterInfo(cctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if cctx.Err() != nil {
				_ = cl.Close()
				c.stop()
				return nil, errors.Join(fmt.Errorf("cluster node %s never reached cluster_state:ok", n.addr), err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cl.Close()
	}
	return c, nil
}

// waitServing waits until p's gRPC health answers SERVING, for at most
// timeout; on failure it stops p and returns an error carrying the log
// written to logPath.
func (p *proc) waitServing(ctx context.Context, logPath, name string, timeout time.Duration) error {
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.stop()
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if time.Now().After(deadline) {
			p.stop()
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s did not start: %v\n%s", name, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
