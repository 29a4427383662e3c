package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// Values below 2^subBits ns are counted exactly; above, every power of two
// is split into 2^(subBits-1) equal buckets.
const (
	subBits    = 8
	subCount   = 1 << subBits // 256
	subHalf    = subCount / 2 // 128 buckets per power of two
	maxShift   = 28           // 2^(28+8) ns ≈ 68.7s covers maxLatency
	numBuckets = (maxShift+1)*subHalf + subHalf

	// maxLatency is the largest latency the histogram resolves; larger
	// ones are counted as maxLatency (Max still reports them exactly).
	maxLatency = 60 * time.Second
)

// precision is the histogram's worst relative error: a recorded value v is
// reported as some value within v·(1 ± precision).
const precision = 1.0 / subHalf

// Histogram counts latencies in log-linear buckets from 1ns to
// maxLatency. The zero value is empty; not safe for concurrent use.
type Histogram struct {
	counts   [numBuckets]uint64
	total    uint64
	sum      uint64 // nanoseconds; 2^64 ns is 584 years
	min, max int64  // nanoseconds, valid when total > 0
}

// bucketOf is the index of the bucket holding v nanoseconds (v >= 0).
func bucketOf(v int64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - subBits // v>>shift is in [128, 256)
	return shift*subHalf + int(v>>shift)
}

// bucketBounds is the range [lo, hi] of nanosecond values in bucket i.
func bucketBounds(i int) (lo, hi int64) {
	if i < subCount {
		return int64(i), int64(i)
	}
	shift := i/subHalf - 1
	sub := int64(i%subHalf + subHalf)
	return sub << shift, (sub+1)<<shift - 1
}

// Record counts one latency. Negative durations count as 0.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	if h.total == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.total++
	h.sum += uint64(v)
	h.counts[bucketOf(min(v, int64(maxLatency)))]++
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.total += o.total
	h.sum += o.sum
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// Count is the number of recorded latencies.
func (h *Histogram) Count() uint64 { return h.total }

// Min is the smallest recorded latency, exactly; 0 when empty.
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max is the largest recorded latency, exactly; 0 when empty.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the exact mean latency; 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / h.total)
}

// Quantile is the latency at quantile q in [0, 1]: the smallest recorded
// value v such that at least q of the values are <= v, within precision.
// Quantile(0) is Min and Quantile(1) is Max, exactly. 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	if q <= 0 {
		return h.Min()
	}
	if q >= 1 {
		return h.Max()
	}
	rank := uint64(math.Ceil(q * float64(h.total))) // >= 1, as q > 0
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketBounds(i)
			v := lo + (hi-lo)/2 // the middle halves the worst error
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return h.Max()
}

// countBelow is how many recorded values fall in buckets whose lower bound
// is below ns nanoseconds: the values < ns, within precision.
func (h *Histogram) countBelow(ns int64) uint64 {
	if ns <= 0 {
		return 0
	}
	var n uint64
	last := bucketOf(min(ns, int64(maxLatency)))
	for i := 0; i <= last; i++ {
		if lo, _ := bucketBounds(i); lo >= ns {
			break
		}
		n += h.counts[i]
	}
	return n
}
