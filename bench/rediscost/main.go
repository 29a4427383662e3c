// Command rediscost measures what a decision costs Redis, deterministically:
// it runs redis-server under callgrind (instrumentation off but for the
// measured phases, toggled by callgrind_control; hz 1 so the cron's share
// is negligible), gives 10,000 keys of
// each algorithm a live state, then drives decisions through the store's
// own code (redisstore.Store.Decide: 1 a call from a lone caller, and 8 a
// call from 8 callers whose calls the batcher joins into one FCALL) and
// prints the instructions Redis executed per decision, beside a minimal
// exact GCRA script (gcra.lua), envoyproxy/ratelimit's pattern (INCRBY +
// EXPIRE a key, pipelined: 1, 3 and 8 keys a pipeline) and `return 1`,
// measured in the same run.
// A second, short wall-clock run on a plain redis-server gives the Redis
// CPU per decision (INFO cpu, main thread), which moves ±30% between runs
// where instructions move < 1%.
//
//	go run ./bench/rediscost            (make redis-cost)
//
// It needs redis-server, valgrind and callgrind_control on PATH.
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

//go:embed gcra.lua
var gcraLua string

// Targets of instructions per decision, each a multiple of another row's
// at the same decisions a call: the token bucket's of the minimal GCRA's,
// the fixed window's (at 8 a call) of the INCRBY + EXPIRE pattern's, every
// other algorithm's of the token bucket's (the sliding window log's own).
const (
	targetTB        = 1.2
	targetFixed     = 1.2
	targetOthers    = 1.3
	targetSlidingLg = 2.0
)

func main() {
	keys := flag.Int("keys", 10_000, "live keys per algorithm")
	n := flag.Int("n", 2_000, "decisions per measured phase under callgrind (a multiple of 8)")
	wall := flag.Int("wall", 20_000, "decisions per phase of the wall-clock run; 0 skips it")
	only := flag.String("only", "", "measure only the subjects (or with -primitives the pieces) whose name contains this (or one of these, separated by '|')")
	profile := flag.String("profile", "", "keep callgrind's dumps (one a phase, for callgrind_annotate) in this directory")
	prims := flag.Bool("primitives", false, "measure the pieces a script is made of (Redis commands from Lua, struct, string functions, a Lua call) instead of the decisions")
	flag.Parse()
	var err error
	if *prims {
		err = runPrimitives(context.Background(), os.Stdout, *only)
	} else {
		err = run(context.Background(), os.Stdout, *keys, *n/8*8, *wall/8*8, *only, *profile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rediscost:", err)
		os.Exit(1)
	}
}

// row is one subject at one number of decisions a call.
type row struct {
	sub     subject
	perCall int
	instr   float64 // per decision
	calls   int64   // FCALLs in the measured phase
	cpuUs   float64 // Redis CPU per decision, µs; 0 if not measured
}

func run(ctx context.Context, out io.Writer, keys, n, wall int, only, profile string) error {
	dir := profile
	if dir == "" {
		tmp, err := os.MkdirTemp("", "rediscost")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var subs []subject
	for _, s := range subjects() {
		if matches(s.name, only) {
			subs = append(subs, s)
		}
	}
	perCalls := []int{8, 1}

	cg, err := startServer(ctx, dir)
	if err != nil {
		return err
	}
	defer cg.stop()
	if err := cg.client.FunctionLoad(ctx, gcraLua).Err(); err != nil {
		return fmt.Errorf("loading gcra.lua: %w", err)
	}
	// The store's library too, before any row: every row then runs beside
	// the same Lua heap, whose size sets the cost of the garbage collector
	// Redis steps every 50 calls.
	if err := warm(ctx, cg, subject{name: "the store's library", prefix: "lib", limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1000, Period: day}}, 1); err != nil {
		return err
	}
	var rows []*row
	for _, s := range subs {
		if !s.cold {
			if err := warm(ctx, cg, s, keys); err != nil {
				return err
			}
		}
		pcs := perCalls
		if s.perCalls != nil {
			pcs = s.perCalls
		}
		for _, pc := range pcs {
			r, err := measure(ctx, cg, s, keys, pc, n)
			if err != nil {
				return err
			}
			rows = append(rows, r)
			fmt.Fprintf(os.Stderr, "%s, %d a call: %.0f instructions a decision (%d FCALLs)\n", s.name, pc, r.instr, r.calls)
		}
	}
	if wall > 0 {
		if err := cpuRun(ctx, rows, keys, wall); err != nil {
			return err
		}
	}
	printTable(out, rows, keys, n, wall)
	return nil
}

// measure counts one subject's instructions per decision at perCall a
// call: a few calls uncounted first (connections, the function library),
// then n counted.
func measure(ctx context.Context, srv *server, s subject, keys, perCall, n int) (*row, error) {
	n = n / perCall * perCall
	d, err := newDriver(srv, s, keys, perCall)
	if err != nil {
		return nil, err
	}
	defer d.close()
	if err := d.run(ctx, 8*perCall); err != nil {
		return nil, err
	}
	before, err := srv.stats(ctx)
	if err != nil {
		return nil, err
	}
	instr, err := srv.counted(func() error { return d.run(ctx, n) })
	if err != nil {
		return nil, err
	}
	after, err := srv.stats(ctx)
	if err != nil {
		return nil, err
	}
	return &row{sub: s, perCall: perCall, instr: float64(instr) / float64(n), calls: after.calls - before.calls}, nil
}

// cpuRun fills in the rows' Redis CPU per decision from a plain
// redis-server: each subject warmed, then wall decisions a phase.
func cpuRun(ctx context.Context, rows []*row, keys, wall int) error {
	srv, err := startServer(ctx, "")
	if err != nil {
		return err
	}
	defer srv.stop()
	if err := srv.client.FunctionLoad(ctx, gcraLua).Err(); err != nil {
		return fmt.Errorf("loading gcra.lua: %w", err)
	}
	warmed := map[string]bool{}
	for _, r := range rows {
		if !warmed[r.sub.name] && !r.sub.cold {
			if err := warm(ctx, srv, r.sub, keys); err != nil {
				return err
			}
			warmed[r.sub.name] = true
		}
		d, err := newDriver(srv, r.sub, keys, r.perCall)
		if err != nil {
			return err
		}
		if err := d.run(ctx, 64*r.perCall); err != nil {
			d.close()
			return err
		}
		n := wall / r.perCall * r.perCall
		before, err := srv.stats(ctx)
		if err == nil {
			err = d.run(ctx, n)
		}
		var after stats
		if err == nil {
			after, err = srv.stats(ctx)
		}
		d.close()
		if err != nil {
			return err
		}
		r.cpuUs = (after.cpu - before.cpu) * 1e6 / float64(n)
	}
	return nil
}

func printTable(out io.Writer, rows []*row, keys, n, wall int) {
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	dirty, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	c := strings.TrimSpace(string(commit))
	if len(dirty) > 0 {
		c += "+changes"
	}
	ver, _ := exec.Command("redis-server", "--version").Output()
	fmt.Fprintf(out, "`make redis-cost`, %s, commit %s, %s (%d CPUs), %s\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), c, cpuModel(), runtime.NumCPU(), firstFields(string(ver), 3))
	fmt.Fprintf(out, "%d live keys a subject; callgrind: %d decisions a phase; Redis CPU: %d decisions a phase, INFO cpu main thread\n\n", keys, n, wall)
	fmt.Fprintln(out, "| subject | decisions a call | instructions / decision | ÷ reference | target | met | FCALLs | Redis CPU µs / decision |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---|---|---:|---:|")
	ref := map[int]float64{}
	b := map[int]bases{}
	for _, r := range rows {
		x := b[r.perCall]
		switch {
		case r.sub.ref == "fgref_gcra":
			ref[r.perCall] = r.instr
			x.gcra = r.instr
		case r.sub.ref == refIncr:
			x.incr = r.instr
		case r.sub.ref == "" && r.sub.limit.Algorithm == algorithms.TokenBucket && x.tb == 0:
			x.tb = r.instr // the first token-bucket row: the others' base
		}
		b[r.perCall] = x
	}
	for _, r := range rows {
		ratio := "–"
		if ref[r.perCall] > 0 {
			ratio = fmt.Sprintf("%.2f", r.instr/ref[r.perCall])
		}
		target, met := targetOf(r, b[r.perCall])
		cpu := "–"
		if r.cpuUs > 0 {
			cpu = fmt.Sprintf("%.1f", r.cpuUs)
		}
		fmt.Fprintf(out, "| %s | %d | %.0f | %s | %s | %s | %d | %s |\n", r.sub.name, r.perCall, r.instr, ratio, target, met, r.calls, cpu)
	}
}

// bases are the rows the targets are multiples of, at one number of
// decisions a call (0: not measured).
type bases struct{ gcra, incr, tb float64 }

// targetOf is the row's target and whether the row meets it.
func targetOf(r *row, b bases) (string, string) {
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	of := func(k, base float64, what string) (string, string) {
		if base == 0 {
			return "(no " + what + " row)", "–"
		}
		return fmt.Sprintf("≤ %.0f (%.1f× %s)", k*base, k, what), yes(r.instr <= k*base)
	}
	switch {
	case r.sub.ref != "":
		return "–", "–"
	case r.sub.limit.Algorithm == algorithms.TokenBucket:
		return of(targetTB, b.gcra, "GCRA")
	case r.sub.limit.Algorithm == algorithms.FixedWindow && r.sub.limit.Calendar == algorithms.NoCalendar && r.perCall == 8:
		return of(targetFixed, b.incr, "INCRBY + EXPIRE")
	case r.sub.limit.Algorithm == algorithms.SlidingWindowLog:
		return of(targetSlidingLg, b.tb, "token bucket")
	}
	return of(targetOthers, b.tb, "token bucket")
}

// matches reports whether name contains only or one of its parts
// separated by '|' ("" matches every name).
func matches(name, only string) bool {
	for _, o := range strings.Split(only, "|") {
		if strings.Contains(name, o) {
			return true
		}
	}
	return false
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func firstFields(s string, n int) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(n, len(f))], " ")
}
