package main

import (
	"fmt"
	"io"
	"math"
)

// plan holds the capacity model's assumptions (docs/capacity.md): how
// much of each machine a deployment plans to use, leaving the rest as
// headroom for bursts, skew between masters and the loss of a peer.
type plan struct {
	// RedisUtil is the share of one core a Redis master is planned to
	// use: Redis executes commands on one thread.
	RedisUtil float64
	// ReplicaCores and ReplicaUtil: a floodgate replica's cores and the
	// share of them it is planned to use.
	ReplicaCores, ReplicaUtil float64
	// MinMasters and MinReplicas: the least a deployment runs (a Redis
	// Cluster needs 3 masters; 2 replicas survive one's loss).
	MinMasters, MinReplicas int
}

// defaultPlan is the plan `make loadtest` prints its table with.
var defaultPlan = plan{RedisUtil: 0.5, ReplicaCores: 4, ReplicaUtil: 0.6, MinMasters: 3, MinReplicas: 2}

// shape is one request shape's measured costs, µs of CPU per decision.
type shape struct {
	name string
	// redisLow is Redis CPU per decision as measured with batching; the
	// figure of a deployment whose masters each see deep batches.
	redisLow float64
	// redisHigh is the bound for many masters, where a replica's batches
	// to each master thin to one call: the descriptors × the unbatched
	// one-descriptor figure (each descriptor its own script call).
	redisHigh float64
	// floodgate is floodgate's CPU per decision on Redis.
	floodgate float64
}

// cores is the CPU a rate needs at usPerDecision: cores busy.
func cores(rate, usPerDecision float64) float64 { return rate * usPerDecision / 1e6 }

// masters is the number of Redis Cluster masters that serve rate at
// redisUs per decision, each planned at RedisUtil of its core, at least
// MinMasters.
func (p plan) masters(rate, redisUs float64) int {
	return max(int(math.Ceil(cores(rate, redisUs)/p.RedisUtil-1e-9)), p.MinMasters)
}

// replicas is the number of floodgate replicas that serve rate at fgUs
// per decision, each planned at ReplicaUtil of ReplicaCores, at least
// MinReplicas.
func (p plan) replicas(rate, fgUs float64) int {
	return max(int(math.Ceil(cores(rate, fgUs)/(p.ReplicaCores*p.ReplicaUtil)-1e-9)), p.MinReplicas)
}

// capacityRates are the rates of the capacity table, decisions/s.
var capacityRates = []float64{100_000, 1_000_000, 10_000_000}

// printCapacity prints the capacity table of docs/capacity.md.
func (p plan) printCapacity(out io.Writer, shapes []shape) {
	fmt.Fprintf(out, "Plan: a Redis master at %.0f%% of its one command thread; a floodgate replica of %.0f cores at %.0f%%; at least %d masters and %d replicas. Redis CPU/decision: measured with batching – bound for many masters (descriptors × unbatched one-descriptor figure).\n\n",
		100*p.RedisUtil, p.ReplicaCores, 100*p.ReplicaUtil, p.MinMasters, p.MinReplicas)
	fmt.Fprintln(out, "| request | decisions/s | Redis CPU/decision | Redis cores busy | masters | floodgate CPU/decision | floodgate cores busy | replicas |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range shapes {
		for _, r := range capacityRates {
			fmt.Fprintf(out, "| %s | %s | %.1f–%.1f µs | %.1f–%.1f | %s | %.1f µs | %.1f | %d |\n",
				s.name, count(r), s.redisLow, s.redisHigh, cores(r, s.redisLow), cores(r, s.redisHigh),
				span(p.masters(r, s.redisLow), p.masters(r, s.redisHigh)),
				s.floodgate, cores(r, s.floodgate), p.replicas(r, s.floodgate))
		}
	}
	fmt.Fprintln(out)
}

func span(lo, hi int) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

// count formats 100000 as 100k and 10000000 as 10M.
func count(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}
