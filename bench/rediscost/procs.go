package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/bench/internal/benchproc"
)

// server is a redis-server this program started, perhaps under callgrind.
type server struct {
	cmd    *exec.Cmd
	addr   string
	cgOut  string // the callgrind output file's prefix; "" without callgrind
	client *redis.Client
}

// startServer starts redis-server on a free loopback port with no
// persistence and hz 1 (the cron runs once a second, so its share of a
// measured phase is negligible); under callgrind when cgDir is set, with
// instrumentation (so counting) off until a phase turns it on.
func startServer(ctx context.Context, cgDir string) (*server, error) {
	s := &server{}
	var prefix []string
	if cgDir != "" {
		s.cgOut = filepath.Join(cgDir, "cg.out")
		prefix = []string{"valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no", "--callgrind-out-file=" + s.cgOut}
	}
	cmd, addr, err := benchproc.StartRedis(ctx, prefix, 60*time.Second, "--hz", "1", "--loglevel", "warning")
	if err != nil {
		return nil, err
	}
	s.cmd, s.addr = cmd, addr
	s.client = redis.NewClient(&redis.Options{Addr: s.addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute, PoolSize: 64})
	return s, nil
}

// stop ends the server.
func (s *server) stop() {
	_ = s.client.Close()
	benchproc.Stop(s.cmd)
}

// stats is what INFO says of the server's main thread's CPU and its
// script calls.
type stats struct {
	cpu   float64 // seconds, main thread user + system
	calls int64   // FCALL calls
}

func (s *server) stats(ctx context.Context) (stats, error) {
	st, err := benchproc.ReadRedisStats(ctx, s.client)
	if err != nil {
		return stats{}, err
	}
	return stats{cpu: st.CPUMain, calls: st.Cmds["fcall"].Calls}, nil
}
