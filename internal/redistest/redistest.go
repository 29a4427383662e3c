// Package redistest starts real redis-server processes for tests: a
// standalone server (StartServer) or a Redis Cluster (StartCluster), each on
// free loopback ports with its own temporary directory, no persistence, and
// stopped by PID when the test ends. It never touches a Redis it did not
// start.
//
// Tests that need Redis call Require first (StartServer, StartSentinel and
// StartCluster do it too). Under `go test -short` (make test-short, the
// inner loop) the test is skipped: -short is an explicit opt-out, and CI
// never uses it (make test runs without it). Otherwise, without
// redis-server and redis-cli on PATH the test is skipped, or fails when the
// environment variable CI is "true", so that CI never passes by skipping.
// scripts/ensure-test-deps.sh installs them.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const stopTimeout = 5 * time.Second

// shortSkip is the reason Require gives when it skips a test under -short.
const shortSkip = "redistest: needs a redis-server, skipped under -short (run without -short, as make test does)"

// Require skips t under -short, and when redis-server or redis-cli is not
// on PATH, where it fails t instead if the environment variable CI is
// "true".
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip(shortSkip)
	}
	var missing []string
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("%s not on PATH; run scripts/ensure-test-deps.sh (apt-get install redis-server redis-tools)", strings.Join(missing, " and "))
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Server is one redis-server process started by StartServer or
// StartCluster. Its methods may be called from several goroutines.
type Server struct {
	t       testing.TB
	dir     string
	args    []string // extra arguments, after the defaults
	cluster bool
	monitor string // sentinel: "name host port", the master it monitors

	mu      sync.Mutex
	port    int
	busPort int // cluster bus port; 0 for a standalone server
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
}

// StartServer starts a standalone redis-server on a free loopback port,
// with --save "" --appendonly no and the extra args (e.g. "--maxmemory",
// "10mb"), waits until it answers PING, and stops it when t ends. It fails
// t if the server does not start.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	Require(t)
	s := &Server{t: t, dir: t.TempDir(), args: args}
	if err := s.start(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartSentinel starts a Redis Sentinel (redis-server --sentinel) on a
// free loopback port that monitors master under name, waits until it
// answers PING and knows the master, and stops it when t ends.
func StartSentinel(t testing.TB, master *Server, name string) *Server {
	t.Helper()
	Require(t)
	s := &Server{t: t, dir: t.TempDir(), monitor: name + " 127.0.0.1 " + strconv.Itoa(master.Port())}
	if err := s.start(); err != nil {
		t.Fatalf("redistest: sentinel: %v", err)
	}
	t.Cleanup(s.Stop)
	c := s.Client()
	deadline := time.Now().Add(startTimeout)
	for {
		addr, err := c.Do(context.Background(), "SENTINEL", "get-master-addr-by-name", name).StringSlice()
		if err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(master.Port()) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: sentinel does not know master %s: %v %v", name, addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is the server's host:port.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port is the server's TCP port.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// PID is the process id of the running server, or 0 when it is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Client returns a new go-redis client for the server, closed when t ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop terminates the server (SIGTERM, then SIGKILL after 5s) and waits
// for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Kill ends the server at once with SIGKILL, as a crash would, and waits
// for it to exit.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Restart stops the server if it runs and starts it again on the same
// port (and cluster bus port), with the same arguments and directory. A
// standalone server comes back empty (nothing is persisted); a cluster
// node keeps its identity from nodes.conf. It fails the test if the server
// does not come back.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// start launches the server, picking free ports on the first start and
// retrying with new ones if another process took them meanwhile.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := s.port == 0
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if fresh {
			if s.port, err = freePort(); err != nil {
				return err
			}
			if s.cluster {
				if s.busPort, err = freePort(); err != nil {
					return err
				}
			}
		}
		if err = s.launch(); err == nil {
			return nil
		}
		if !fresh {
			time.Sleep(100 * time.Millisecond) // the old process' port may linger briefly
		}
	}
	return err
}

// launch runs redis-server once and waits for PING; s.mu is held.
func (s *Server) launch() error {
	var args []string
	if s.monitor != "" {
		// A sentinel needs a config file of its own (it rewrites it), as
		// the first argument.
		conf := filepath.Join(s.dir, "sentinel.conf")
		body := "sentinel monitor " + s.monitor + " 1\nsentinel down-after-milliseconds " + strings.Fields(s.monitor)[0] + " 1000\n"
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			return fmt.Errorf("write sentinel.conf: %w", err)
		}
		args = append(args, conf, "--sentinel")
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
		"--daemonize", "no",
	)
	if s.monitor == "" { // a sentinel keeps no data
		args = append(args, "--save", "", "--appendonly", "no")
	}
	if s.cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000",
			"--cluster-port", strconv.Itoa(s.busPort),
		)
	}
	args = append(args, s.args...)
	cmd := exec.Command("redis-server", args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited during start: %s", addr, s.logTail())
		default:
		}
		// Answered by this process, not by another that holds the port:
		// two servers starting at once may be handed the same free port,
		// and the loser exits only after the winner answers.
		if answeredBy(addr, cmd.Process.Pid) == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on %s did not answer PING within %v: %s", addr, startTimeout, s.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logTail is the end of the server's log, for error messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// answeredBy checks that the server at addr is the process pid: an
// inline INFO server, whose process_id must be pid.
func answeredBy(addr string, pid int) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 || n > 1<<20 {
		return fmt.Errorf("INFO server answered %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if !strings.Contains(string(body), "\r\nprocess_id:"+strconv.Itoa(pid)+"\r\n") {
		return fmt.Errorf("%s is answered by another process than %d", addr, pid)
	}
	return nil
}

// freePort asks the kernel for a free loopback TCP port. Another process
// may take it before redis-server binds it; start retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("find a free port: not a TCP address")
	}
	return addr.Port, nil
}

// Cluster is a Redis Cluster of redis-server processes started by
// StartCluster.
type Cluster struct {
	t     testing.TB
	nodes []*Server
}

// StartCluster starts masters × (1 + replicasPerMaster) cluster-enabled
// nodes on free loopback ports, joins them with
// `redis-cli --cluster create … --cluster-replicas replicasPerMaster
// --cluster-yes`, waits until every node reports cluster_state:ok and
// knows every other node, and stops them all when t ends. masters must be
// at least 3 (redis-cli's minimum).
func StartCluster(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	Require(t)
	if masters < 3 || replicasPerMaster < 0 {
		t.Fatalf("redistest: StartCluster(%d, %d): need at least 3 masters and no negative replica count", masters, replicasPerMaster)
	}
	c := &Cluster{t: t, nodes: make([]*Server, masters*(1+replicasPerMaster))}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i := range c.nodes {
		c.nodes[i] = &Server{t: t, dir: t.TempDir(), cluster: true}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.nodes[i].start()
		}()
	}
	wg.Wait()
	for _, n := range c.nodes {
		t.Cleanup(n.Stop)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("redistest: start cluster nodes: %v", err)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s\n%s", strings.Join(args, " "), err, out, c.state())
	}
	if err := c.waitOK(ctx); err != nil {
		t.Fatalf("redistest: %v\n%s", err, c.state())
	}
	return c
}

// state is what each node knows of the cluster (CLUSTER NODES) and the
// end of its log, for a join that never completes.
func (c *Cluster) state() string {
	var b strings.Builder
	for _, n := range c.nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		nodes, err := cl.ClusterNodes(ctx).Result()
		cancel()
		_ = cl.Close()
		fmt.Fprintf(&b, "node %s (bus port %d): CLUSTER NODES %v\n%s", n.Addr(), n.busPort, err, nodes)
		log, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		fmt.Fprintf(&b, "its log's last lines:\n%s\n", strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return b.String()
}

// waitOK polls every node until it reports cluster_state:ok and knows
// every node.
func (c *Cluster) waitOK(ctx context.Context) error {
	want := strconv.Itoa(len(c.nodes))
	for _, n := range c.nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
		var last string
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+want+"\r\n") {
				break
			}
			last = fmt.Sprint(info, err)
			select {
			case <-ctx.Done():
				_ = cl.Close()
				return fmt.Errorf("node %s never reached cluster_state:ok with %s known nodes: %s", n.Addr(), want, last)
			case <-time.After(20 * time.Millisecond):
			}
		}
		_ = cl.Close()
	}
	return nil
}

// Addrs are the nodes' host:port addresses, in node order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Len is the number of nodes, masters and replicas.
func (c *Cluster) Len() int { return len(c.nodes) }

// Node is node i, in the order of Addrs. redis-cli makes the first masters
// nodes the masters when the cluster is created.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// Kill ends node i with SIGKILL, as a crash would.
func (c *Cluster) Kill(i int) { c.nodes[i].Kill() }

// Client returns a new cluster client seeded with every node, closed when
// the test ends.
func (c *Cluster) Client() *redis.ClusterClient {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}
