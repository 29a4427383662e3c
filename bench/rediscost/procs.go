package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// control runs callgrind_control on the server's process.
func (s *server) control(args ...string) error {
	out, err := exec.Command("callgrind_control", append(args, strconv.Itoa(s.cmd.Process.Pid))...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("callgrind_control %v: %w: %s", args, err, out)
	}
	return nil
}

// counted runs f with callgrind counting and returns the instructions
// Redis executed meanwhile: instrumentation on, counters zeroed, f,
// instrumentation off, a dump, whose totals line is the count.
func (s *server) counted(f func() error) (int64, error) {
	if err := s.control("-i", "on"); err != nil {
		return 0, err
	}
	if err := s.control("-z"); err != nil {
		return 0, err
	}
	ferr := f()
	if err := s.control("-i", "off"); err != nil {
		return 0, err
	}
	before, _ := filepath.Glob(s.cgOut + "*")
	if err := s.control("-d"); err != nil {
		return 0, err
	}
	if ferr != nil {
		return 0, ferr
	}
	after, _ := filepath.Glob(s.cgOut + "*")
	seen := map[string]bool{}
	for _, f := range before {
		seen[f] = true
	}
	for _, f := range after {
		if !seen[f] {
			total, err := totals(f)
			if err != nil {
				return 0, err
			}
			cron, err := cronShare(f)
			if err != nil {
				return 0, err
			}
			return total - cron, nil
		}
	}
	return 0, errors.New("callgrind wrote no dump")
}

// cronShare is the instructions of Redis' cron (serverCron, with what it
// calls) in a callgrind dump, from callgrind_annotate's inclusive costs.
// Under callgrind Redis runs some 50 times slower, so its once-a-second
// cron (hz 1) weighs on a phase some 50 times more than on a real
// server (about 3 % of a decision here); counted keeps it out.
func cronShare(path string) (int64, error) {
	out, err := exec.Command("callgrind_annotate", "--inclusive=yes", "--threshold=100", path).Output()
	if err != nil {
		return 0, fmt.Errorf("callgrind_annotate %s: %w", path, err)
	}
	return cronIn(string(out)), nil
}

// cronIn reads serverCron's inclusive count from callgrind_annotate's
// output (0 when the cron did not run).
func cronIn(annotate string) int64 {
	for _, line := range strings.Split(annotate, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.Contains(line, ":serverCron ") {
			n, err := strconv.ParseInt(strings.ReplaceAll(f[0], ",", ""), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return 0
}

// totals reads the instruction count of a callgrind dump.
func totals(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "totals: "); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no totals line", path)
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
