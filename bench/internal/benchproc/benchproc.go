// Package benchproc starts and stops the processes the benchmarks run
// (redis-server, perhaps under valgrind; floodgate): on free loopback
// addresses, without persistence, stopped by their own process.
package benchproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/redis/go-redis/v9"
)

// FreeAddr is a loopback host:port free when asked.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Stop ends cmd, unless it has ended: SIGINT, then SIGKILL after 10 s.
func Stop(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// StartRedis starts redis-server on a free loopback port without
// persistence, with args after its own, run by the command prefix when
// one is given (valgrind and its flags), and returns it with its address
// once it answers PING, within wait.
func StartRedis(ctx context.Context, prefix []string, wait time.Duration, args ...string) (*exec.Cmd, string, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, "", err
	}
	_, port, _ := net.SplitHostPort(addr)
	argv := append(append(prefix, "redis-server", "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no"), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s (make loadtest and make redis-cost install redis-server): %w", argv[0], err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(wait); ; {
		err := c.Ping(ctx).Err()
		if err == nil {
			return cmd, addr, nil
		}
		if time.Now().After(deadline) {
			Stop(cmd)
			return nil, "", fmt.Errorf("redis-server did not answer PING within %v: %w", wait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
