package main

import (
	"fmt"
	"io"
)

// figures are the results the goals and the capacity table are computed
// from, all from one run.
type figures struct {
	memCeiling result
	mem        [3]result // embedded: Check, ShouldRateLimit with 1 and 3 descriptors (token bucket)

	redisCeiling result
	redis        [4][3]result // one redis-server: algos × shapes
	denied       result       // mostly denied, 10 keys
	hot          result       // one key, never denied
	lone         result       // one worker
	unbatched    result       // ShouldRateLimit, 1 descriptor, batching off

	clusterCeiling   result
	cluster          [2]result // three masters: ShouldRateLimit with 1 and 3 descriptors
	clusterHot       result    // three masters, one key, never denied
	clusterHotDenied result    // three masters, one key over its limit
}

func (f *figures) haveCluster() bool { return f.cluster[1].Redis != nil }

// ratio is r's rate over its ceiling's.
func ratio(r, ceiling result) float64 {
	if ceiling.RequestsPerSec == 0 {
		return 0
	}
	return r.RequestsPerSec / ceiling.RequestsPerSec
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "**missed**"
}

// printGoals prints the performance goals next to this run's
// figures.
func (f *figures) printGoals(out io.Writer) {
	fmt.Fprintln(out, "### Goals, this run")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| goal | target | measured | |")
	fmt.Fprintln(out, "|---|---|---|---|")
	for i, a := range algos {
		r := f.redis[i]
		c, one, three := redisUs(r[0]), redisUs(r[1]), redisUs(r[2])
		if a.limit.Algorithm == logLimit.Algorithm {
			fmt.Fprintf(out, "| Redis CPU/decision, %s (1,000/10 s): Check / 1 / 3 descriptors | ≤ 8 / 8 / — µs | %.1f / %.1f / %.1f µs | %s |\n",
				a.name, c, one, three, verdict(c <= 8 && one <= 8))
			continue
		}
		fmt.Fprintf(out, "| Redis CPU/decision, %s: Check / 1 / 3 descriptors | ≤ 4 / 4 / 10 µs | %.1f / %.1f / %.1f µs | %s |\n",
			a.name, c, one, three, verdict(c <= 4 && one <= 4 && three <= 10))
	}
	for j, name := range []string{"Check", "ShouldRateLimit, 1 descriptor", "ShouldRateLimit, 3 descriptors"} {
		m, r := f.mem[j].FloodgateUs, f.redis[0][j].FloodgateUs
		fmt.Fprintf(out, "| floodgate CPU/decision on Redis, %s (token bucket) | ≤ embedded + 5 µs | %.1f µs vs %.1f µs embedded (%+.1f) | %s |\n",
			name, r, m, r-m, verdict(m >= 0 && r >= 0 && r <= m+5))
	}
	for _, g := range []struct {
		name string
		r    result
		min  float64
	}{
		{"Redis, ShouldRateLimit, 1 descriptor ÷ health ceiling", f.redis[0][1], 0.70},
		{"Redis, ShouldRateLimit, 3 descriptors ÷ health ceiling", f.redis[0][2], 0.55},
		{"Redis, Check ÷ health ceiling", f.redis[0][0], 0.70},
	} {
		v := ratio(g.r, f.redisCeiling)
		fmt.Fprintf(out, "| %s | ≥ %.2f | %.2f | %s |\n", g.name, g.min, v, verdict(v >= g.min))
	}
	p50 := f.lone.LatencyUs.P50
	fmt.Fprintf(out, "| Redis, one worker, p50 | ≤ 0.25 ms | %.3f ms | %s |\n", p50/1000, verdict(p50 <= 250))
	for _, g := range []struct {
		name string
		r    result
		min  float64
	}{
		{"embedded, ShouldRateLimit, 1 descriptor ÷ health ceiling", f.mem[1], 0.85},
		{"embedded, ShouldRateLimit, 3 descriptors ÷ health ceiling", f.mem[2], 0.75},
		{"embedded, Check ÷ health ceiling", f.mem[0], 0.85},
	} {
		v := ratio(g.r, f.memCeiling)
		fmt.Fprintf(out, "| %s | ≥ %.2f | %.2f | %s |\n", g.name, g.min, v, verdict(v >= g.min))
	}
	fmt.Fprintln(out)
	var degraded float64
	for _, r := range f.all() {
		degraded += r.Degraded
	}
	fmt.Fprintf(out, "Decisions answered by a failure mode (Redis slower than --redis-timeout %s, or down) in all runs: %.0f; each row's errors column says where.\n\n", redisTimeout, degraded)
}

// all is every run's result.
func (f *figures) all() []result {
	rs := []result{f.redisCeiling, f.denied, f.hot, f.lone, f.unbatched, f.clusterCeiling, f.clusterHot, f.clusterHotDenied}
	rs = append(rs, f.mem[:]...)
	rs = append(rs, f.cluster[:]...)
	for _, a := range f.redis {
		rs = append(rs, a[:]...)
	}
	return rs
}

func redisUs(r result) float64 {
	if r.Redis == nil {
		return -1
	}
	return r.Redis.CPUUs
}

// shapes are the capacity table's inputs: ShouldRateLimit with 1 and 3
// descriptors on token buckets, from the three-master cluster when it ran
// (else the one server), bounded above by the unbatched figure.
func (f *figures) shapes() []shape {
	var out []shape
	for j, d := range []float64{1, 3} {
		r := f.redis[0][j+1]
		if f.haveCluster() {
			r = f.cluster[j]
		}
		low := redisUs(r)
		out = append(out, shape{
			name:      fmt.Sprintf("ShouldRateLimit, %.0f descriptor%s", d, map[bool]string{true: "s"}[d > 1]),
			redisLow:  low,
			redisHigh: max(d*redisUs(f.unbatched), low),
			floodgate: r.FloodgateUs,
		})
	}
	return out
}

// printHotKey prints what one hot key costs the one master that holds it:
// from the three-master cluster when it ran, else from the one server.
func (f *figures) printHotKey(out io.Writer, p plan) {
	under, over, where := f.hot, f.denied, "one server"
	if f.haveCluster() {
		under, over, where = f.clusterHot, f.clusterHotDenied, "3 masters"
	}
	u := f.unbatched.Redis
	if under.Redis == nil || over.Redis == nil || u == nil {
		return
	}
	fmt.Fprintf(out, "One hot key (%s; the master holding it: busiest master's share of Redis CPU):\n\n", where)
	fmt.Fprintln(out, "| one hot key | decisions/s | Redis CPU/decision | busiest master's share | scripts/decision | decisions/s one master core serves at 100% | at the plan's share |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range []struct {
		name string
		rate float64
		u    *redisUse
	}{
		{"under its limit, batched (one key, 50 workers)", under.RequestsPerSec, under.Redis},
		{"under its limit, unbatched (one server, batching off)", f.unbatched.RequestsPerSec, u},
		{"over its limit (deny cache)", over.RequestsPerSec, over.Redis},
	} {
		fmt.Fprintf(out, "| %s | %.0f | %s | %.0f%% | %.4f | %.0f | %.0f |\n", r.name, r.rate, cpuUs(r.u.CPUUs), 100*r.u.BusiestShare, r.u.CallsPerDecision, 1e6/r.u.CPUUs, p.RedisUtil*1e6/r.u.CPUUs)
	}
	fmt.Fprintln(out)
}
