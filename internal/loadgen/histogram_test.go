package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketBoundsContainValue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	values := []int64{0, 1, 255, 256, 257, 511, 512, 1000, 1 << 20, int64(maxLatency)}
	for range 100_000 {
		values = append(values, int64(math.Exp(r.Float64()*math.Log(float64(maxLatency)))))
	}
	for _, v := range values {
		i := bucketOf(v)
		if i < 0 || i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d, out of [0, %d)", v, i, numBuckets)
		}
		lo, hi := bucketBounds(i)
		if v < lo || v > hi {
			t.Fatalf("bucket %d of %d is [%d, %d], which does not hold it", i, v, lo, hi)
		}
		if width := float64(hi - lo + 1); width > 1 && width > float64(lo)*precision {
			t.Fatalf("bucket %d [%d, %d] is wider than %v of its values", i, lo, hi, precision)
		}
	}
	// Buckets tile the range: each starts right after the previous one.
	for i := 1; i < numBuckets; i++ {
		_, prevHi := bucketBounds(i - 1)
		if lo, _ := bucketBounds(i); lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, prevHi+1)
		}
	}
}

// reference is the exact quantile of sorted values, as Quantile defines it.
func reference(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func TestQuantileMatchesSortedReference(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	dists := map[string]func() time.Duration{
		"log-uniform 1µs-10s": func() time.Duration {
			return time.Duration(math.Exp(math.Log(1e3) + r.Float64()*(math.Log(1e10)-math.Log(1e3))))
		},
		"normal around 400µs": func() time.Duration {
			return time.Duration(max(1e3, 400e3+100e3*r.NormFloat64()))
		},
		"exponential, mean 1ms": func() time.Duration {
			return time.Duration(r.ExpFloat64() * 1e6)
		},
	}
	for name, draw := range dists {
		t.Run(name, func(t *testing.T) {
			var h Histogram
			vals := make([]time.Duration, 50_000)
			for i := range vals {
				vals[i] = draw()
				h.Record(vals[i])
			}
			slices.Sort(vals)
			for _, q := range []float64{0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
				got, want := h.Quantile(q), reference(vals, q)
				if diff := math.Abs(float64(got - want)); diff > float64(want)*precision {
					t.Errorf("Quantile(%v) = %v, want %v within %.2f%%", q, got, want, 100*precision)
				}
			}
			if h.Min() != vals[0] || h.Max() != vals[len(vals)-1] {
				t.Errorf("Min, Max = %v, %v, want %v, %v", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
			}
			var sum time.Duration
			for _, v := range vals {
				sum += v
			}
			if want := sum / time.Duration(len(vals)); h.Mean() != want {
				t.Errorf("Mean = %v, want %v", h.Mean(), want)
			}
			if h.Count() != uint64(len(vals)) {
				t.Errorf("Count = %d, want %d", h.Count(), len(vals))
			}
		})
	}
}

func TestMergeEqualsRecordingEverything(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var all, a, b, empty Histogram
	for i := range 10_000 {
		d := time.Duration(r.Int64N(int64(10 * time.Millisecond)))
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var merged Histogram
	merged.Merge(&empty)
	merged.Merge(&a)
	merged.Merge(&b)
	merged.Merge(&empty)
	if merged != all {
		t.Fatalf("merged histogram differs: count %d min %v max %v, want count %d min %v max %v",
			merged.Count(), merged.Min(), merged.Max(), all.Count(), all.Min(), all.Max())
	}
}

func TestHistogramEdges(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Min() != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Fatal("an empty histogram reports non-zero latencies")
	}
	h.Record(-time.Second) // counts as 0
	h.Record(2 * time.Minute)
	if h.Min() != 0 || h.Max() != 2*time.Minute {
		t.Fatalf("Min, Max = %v, %v, want 0, 2m", h.Min(), h.Max())
	}
	// Above maxLatency the quantile is clamped to the exact Max.
	if got := h.Quantile(0.99); got < maxLatency-time.Duration(float64(maxLatency)*precision) || got > 2*time.Minute {
		t.Fatalf("Quantile(0.99) = %v, want about %v", got, maxLatency)
	}
	if got := h.Quantile(0.5); got != 0 {
		t.Fatalf("Quantile(0.5) = %v, want 0", got)
	}
	if got := h.countBelow(int64(time.Hour)); got != 2 {
		t.Fatalf("countBelow(1h) = %d, want 2", got)
	}
}

func TestRecordDoesNotAllocate(t *testing.T) {
	var h Histogram
	d := 123 * time.Microsecond
	if n := testing.AllocsPerRun(1000, func() { h.Record(d); d += 977 }); n != 0 {
		t.Fatalf("Record allocates %v times per call", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	// Latencies spread over 10µs-100ms, so that the benchmark touches many
	// buckets as a real run does, not one hot counter.
	r := rand.New(rand.NewPCG(5, 6))
	vals := make([]time.Duration, 4096)
	for i := range vals {
		vals[i] = time.Duration(math.Exp(math.Log(1e4) + r.Float64()*(math.Log(1e8)-math.Log(1e4))))
	}
	h := new(Histogram)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.Record(vals[i&4095])
		i++
	}
	if h.Count() != uint64(i) {
		b.Fatalf("recorded %d, want %d", h.Count(), i)
	}
}

func BenchmarkQuantile(b *testing.B) {
	h := new(Histogram)
	for i := range 100_000 {
		h.Record(time.Duration(i) * 100 * time.Nanosecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = h.Quantile(0.99)
	}
}

func TestBinsHoldEveryRequest(t *testing.T) {
	// A bin edge that falls inside the bucket holding Min once lost that
	// bucket's requests: the bars must always add up to the count.
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 3 * len(binEdges) * 4 {
		for _, lo := range []int64{edge(i), edge(i) + 1, r.Int64N(int64(10 * time.Millisecond))} {
			h := new(Histogram)
			h.Record(time.Duration(lo))
			for range r.IntN(50) {
				h.Record(time.Duration(lo + r.Int64N(int64(time.Millisecond))))
			}
			var sum uint64
			for _, b := range (&Result{Latency: h}).bins() {
				sum += b.Count
			}
			if sum != h.Count() {
				t.Fatalf("bins from min %v hold %d requests, want %d", h.Min(), sum, h.Count())
			}
		}
	}
}
