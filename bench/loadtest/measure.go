package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate/bench/internal/benchproc"
	"github.com/floodgate/floodgate/internal/loadgen"
)

// target is what a run loads: a floodgate process and the Redis nodes
// (masters) behind it, none for the embedded store.
type target struct {
	fg    *proc
	redis []*redis.Client
}

// result is one run's figures. Every CPU figure is a delta over the
// measured interval only (loadgen.Config.MeasureHook), divided by the
// decisions answered in it.
type result struct {
	loadgen.Report
	Seconds   float64
	Decisions uint64
	// FloodgateUs is floodgate's CPU per decision (/proc), µs; -1 unknown.
	FloodgateUs float64
	// Redis is nil for the embedded store.
	Redis *redisUse
	// Degraded is the decisions floodgate answered by a failure mode
	// (Redis too slow or down) in the measured interval: they cost Redis
	// nothing, so a row with any is not a clean measure of Redis' cost.
	Degraded float64
}

// redisUse is what Redis spent on a run, summed over its nodes.
type redisUse struct {
	// CPUUs is used_cpu_sys + used_cpu_user per decision, µs.
	CPUUs float64
	// MainUs is the same for the main thread (used_cpu_*_main_thread,
	// Redis 7+), -1 when the server does not report it.
	MainUs float64
	// CallsPerDecision is EVALSHA + EVAL calls per decision.
	CallsPerDecision float64
	// CommandsPerDecision is every command Redis ran (a script call
	// counting once, a command a script made too) per decision.
	CommandsPerDecision float64
	// BusiestShare is the busiest node's share of the CPU (1 with one node).
	BusiestShare float64
	// Cores is the CPU used over the measured time: 1.0 is one core busy.
	Cores float64
}

func table(out io.Writer) {
	fmt.Fprintln(out, "| run | decisions/s | % of ceiling | allowed | denied | errors | p50 | p90 | p99 | p99.9 | max | floodgate CPU/decision | generator CPU/decision | Redis CPU/decision | Redis main thread/decision | scripts/decision |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
}

func row(out io.Writer, name string, r result, ceiling float64) {
	pct := "—"
	if ceiling > 0 {
		pct = fmt.Sprintf("%.0f%%", 100*r.RequestsPerSec/ceiling)
	}
	l := r.LatencyUs
	rc, rm, calls := "—", "—", "—"
	if r.Redis != nil {
		rc, rm, calls = cpuUs(r.Redis.CPUUs), cpuUs(r.Redis.MainUs), fmt.Sprintf("%.3f", r.Redis.CallsPerDecision)
	}
	errs := fmt.Sprint(r.Errors)
	if r.Degraded > 0 {
		errs += fmt.Sprintf(" (+%.0f degraded)", r.Degraded)
	}
	fmt.Fprintf(out, "| %s | %.0f | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
		name, r.RequestsPerSec, pct, r.Allowed, r.Denied, errs, us(l.P50), us(l.P90), us(l.P99), us(l.P999), us(l.Max),
		cpuUs(r.FloodgateUs), cpuUs(r.GeneratorCPU.UsPerRequest), rc, rm, calls)
}

func us(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f ms", v/1000)
	}
	return fmt.Sprintf("%.0f µs", v)
}

// cpuUs formats a CPU time per decision; negative means unknown.
func cpuUs(v float64) string {
	if v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f µs", v)
}

// measure runs one load, prints its row and returns it.
func (s settings) measure(ctx context.Context, t target, name string, cfg loadgen.Config, ceiling float64, out io.Writer) (result, error) {
	r, err := s.measureReport(ctx, t, cfg)
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", name, err)
	}
	row(out, name, r, ceiling)
	return r, nil
}

// snapshot is the counters read as a measurement begins and ends.
type snapshot struct {
	fgCPU    time.Duration
	fgOK     bool
	degraded float64
	redis    []benchproc.RedisStats
}

func (t target) snapshot(ctx context.Context) (snapshot, error) {
	var s snapshot
	s.fgCPU, s.fgOK = t.fg.cpu()
	var err error
	if s.degraded, err = t.fg.degraded(ctx); err != nil {
		return s, err
	}
	for _, c := range t.redis {
		st, err := benchproc.ReadRedisStats(ctx, c)
		if err != nil {
			return s, err
		}
		s.redis = append(s.redis, st)
	}
	return s, nil
}

func (s settings) measureReport(ctx context.Context, t target, cfg loadgen.Config) (result, error) {
	conn, err := grpc.NewClient(t.fg.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return result{}, err
	}
	defer conn.Close()
	cfg.Conns = []grpc.ClientConnInterface{conn}
	cfg.Concurrency = s.concurrency
	cfg.Duration = s.duration
	cfg.Warmup = s.warmup
	cfg.Keys = s.keys
	cfg.Target = t.fg.grpcAddr
	var begin, end snapshot
	var hookErr error
	cfg.MeasureHook = func(b bool) {
		snap, err := t.snapshot(ctx)
		hookErr = errors.Join(hookErr, err)
		if b {
			begin = snap
		} else {
			end = snap
		}
	}
	res, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return result{}, err
	}
	if hookErr != nil {
		return result{}, fmt.Errorf("read counters: %w", hookErr)
	}
	rep := res.Report()
	if rep.Errors > 0 {
		return result{}, fmt.Errorf("%d errors: %v", rep.Errors, rep.ErrorsByCode)
	}
	r := result{Report: rep, Seconds: rep.ElapsedSeconds, Decisions: rep.Allowed + rep.Denied, FloodgateUs: -1, Degraded: end.degraded - begin.degraded}
	n := float64(max(r.Decisions, 1))
	if begin.fgOK && end.fgOK {
		r.FloodgateUs = float64(end.fgCPU-begin.fgCPU) / float64(time.Microsecond) / n
	}
	if len(t.redis) > 0 && len(begin.redis) == len(end.redis) {
		r.Redis = redisDelta(begin.redis, end.redis, n, r.Seconds)
	}
	return r, nil
}

// redisDelta sums the nodes' deltas into per-decision figures.
func redisDelta(begin, end []benchproc.RedisStats, decisions, seconds float64) *redisUse {
	u := &redisUse{}
	var cpu, main, busiest float64
	var calls int64
	hasMain := true
	for i := range begin {
		d := end[i].CPU - begin[i].CPU
		cpu += d
		busiest = max(busiest, d)
		main += end[i].CPUMain - begin[i].CPUMain
		hasMain = hasMain && end[i].HasMain
		calls += end[i].Scripts - begin[i].Scripts
		for name, c := range end[i].Cmds {
			u.CommandsPerDecision += float64(c.Calls - begin[i].Cmds[name].Calls)
		}
	}
	u.CommandsPerDecision /= decisions
	u.CPUUs = cpu * 1e6 / decisions
	u.MainUs = -1
	if hasMain {
		u.MainUs = main * 1e6 / decisions
	}
	u.CallsPerDecision = float64(calls) / decisions
	if cpu > 0 {
		u.BusiestShare = busiest / cpu
	}
	if seconds > 0 {
		u.Cores = cpu / seconds
	}
	return u
}
