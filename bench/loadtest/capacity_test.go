package main

import "testing"

func TestPlanArithmetic(t *testing.T) {
	p := defaultPlan // masters at 50%, replicas of 4 cores at 60%, at least 3 and 2
	cases := []struct {
		name                  string
		rate, redisUs, fgUs   float64
		wantMasters, wantReps int
	}{
		{"small load keeps the minimums", 100_000, 4, 20, 3, 2},
		{"1M at 4 µs: 4 cores busy, 8 masters", 1_000_000, 4, 20, 8, 9},
		{"exact multiple needs no extra", 1_000_000, 5, 24, 10, 10},
		{"10M at 10 µs: 100 cores, 200 masters", 10_000_000, 10, 30, 200, 125},
		{"one over a multiple rounds up", 1_000_001, 5, 24, 11, 11},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.masters(tc.rate, tc.redisUs); got != tc.wantMasters {
				t.Errorf("masters(%g, %g) = %d, want %d", tc.rate, tc.redisUs, got, tc.wantMasters)
			}
			if got := p.replicas(tc.rate, tc.fgUs); got != tc.wantReps {
				t.Errorf("replicas(%g, %g) = %d, want %d", tc.rate, tc.fgUs, got, tc.wantReps)
			}
		})
	}
}

func TestCount(t *testing.T) {
	for v, want := range map[float64]string{100_000: "100k", 1_000_000: "1M", 10_000_000: "10M", 2_500_000: "2.5M", 12: "12"} {
		if got := count(v); got != want {
			t.Errorf("count(%g) = %q, want %q", v, got, want)
		}
	}
}

func TestSumMetric(t *testing.T) {
	text := `# HELP floodgate_decisions_total Rate-limit decisions.
# TYPE floodgate_decisions_total counter
floodgate_decisions_total{algorithm="token_bucket",api="envoy",domain="bench",result="allowed",rule="bench_key"} 1000
floodgate_decisions_total{algorithm="token_bucket",api="envoy",domain="bench",result="degraded",rule="bench_key"} 7
floodgate_decisions_total{algorithm="fixed_window",api="check",domain="",result="degraded",rule=""} 3
floodgate_decisions_total_other{result="degraded"} 100
floodgate_store_errors_total{backend="redis",op="decide"} 5
`
	if got := sumMetric(text, "floodgate_decisions_total", `result="degraded"`); got != 10 {
		t.Fatalf("sum = %v, want 10", got)
	}
}
