package main

// Reading Redis' instructions from callgrind: turning counting on and off
// around a phase, and the counts of its dumps.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

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
