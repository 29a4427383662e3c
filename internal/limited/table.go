package limited

import (
	"container/heap"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// ruleInfo describes a tracked rule.
type ruleInfo struct {
	kind   Kind
	domain string
	name   string
	id     string
	source string // file:line:column or the xDS resource (Envoy rules)
	limit  string
	shadow bool
}

// renormalizeAfter is how far the decay's landmark may fall behind: the
// weights grow as e^(age/ShortWindow), e^60 after an hour, far from
// float64's limit.
const renormalizeAfter = time.Hour

// counter is one key's counts. The decayed ones are forward-decayed:
// stored as the sum of e^((t-landmark)/window) over the key's decisions,
// read as that times e^(-(now-landmark)/window).
type counter struct {
	hash      uint64
	heapPos   int32
	keyLen    uint8
	truncated bool
	key       [KeyBytes]byte
	// weight ranks the counter (space-saving): its denials over
	// LongWindow plus what it inherited from the key it replaced.
	weight float64
	// Own decayed counts over the two windows.
	denied, deniedCost, allowed [2]float64
	// Exact counts since first.
	deniedTotal, deniedCostTotal, allowedTotal int64
	first, last                                int64 // unix ns
}

// point is one bucket of a rule's chart.
type point struct {
	step               int64 // unix ns / SeriesStep
	decisions, denials int64
}

// table is one rule's counters: a heap of the counters by weight (least
// first), an open-addressing index from key hash to counter, and the
// rule's chart.
type table struct {
	info ruleInfo
	seen atomic.Int64 // unix ns of the last decision

	mu       sync.Mutex
	landmark int64 // unix ns
	counters []counter
	heap     []int32 // counter indexes; len is the counters in use
	index    []int32 // counter index + 1, 0 empty; len a power of two ≥ 2 × len(counters)
	series   [SeriesPoints]point
	decided  int64 // decisions since the rule was first seen
	denied   int64 // denials since then
	mac      hash.Hash
	scratch  [64]byte
}

func newTable(info ruleInfo, cfg Config, now time.Time) *table {
	n := cfg.keys()
	tb := &table{
		info:     info,
		landmark: now.UnixNano(),
		counters: make([]counter, n),
		heap:     make([]int32, 0, n),
		index:    make([]int32, indexSize(n)),
	}
	if len(cfg.Salt) > 0 {
		tb.mac = hmac.New(sha256.New, cfg.Salt)
	}
	tb.seen.Store(now.UnixNano())
	return tb
}

// observe counts one decision of key k in tb (nil: its rule found no
// place; a cost of 0 or less is a look, not counted).
func observe[K keySource](tb *table, now time.Time, k K, cost int64, allowed bool) {
	if tb == nil || cost <= 0 {
		return
	}
	ns := now.UnixNano()
	tb.seen.Store(ns)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.count(ns, allowed)
	if allowed && len(tb.heap) == 0 {
		return
	}
	h := k.hash()
	slot, i := tb.find(h)
	if i < 0 && allowed {
		return
	}
	if ns-tb.landmark > int64(renormalizeAfter) {
		tb.renormalize(ns)
	}
	w := tb.weights(ns)
	if i < 0 {
		i = take(tb, h, slot, k, ns)
	}
	c := &tb.counters[i]
	c.last = ns
	if allowed {
		c.allowed[0] += w[0]
		c.allowed[1] += w[1]
		c.allowedTotal++
		return
	}
	c.denied[0] += w[0]
	c.denied[1] += w[1]
	c.deniedCost[0] += w[0] * float64(cost)
	c.deniedCost[1] += w[1] * float64(cost)
	c.deniedTotal++
	c.deniedCostTotal += cost
	c.weight += w[1]
	heap.Fix(tb, int(c.heapPos))
}

// count adds a decision to the rule's totals and chart.
func (tb *table) count(ns int64, allowed bool) {
	step := ns / int64(SeriesStep)
	p := &tb.series[uint64(step)%SeriesPoints]
	if p.step != step {
		*p = point{step: step}
	}
	p.decisions++
	tb.decided++
	if !allowed {
		p.denials++
		tb.denied++
	}
}

// weights are a decision's weights at ns in the two windows. A clock
// that went back before the landmark weighs as the landmark.
func (tb *table) weights(ns int64) [2]float64 {
	age := float64(max(ns-tb.landmark, 0))
	return [2]float64{math.Exp(age / float64(ShortWindow)), math.Exp(age / float64(LongWindow))}
}

// renormalize moves the landmark to ns, scaling every weight.
func (tb *table) renormalize(ns int64) {
	w := tb.weights(ns)
	s := [2]float64{1 / w[0], 1 / w[1]}
	for _, i := range tb.heap {
		c := &tb.counters[i]
		for j := range 2 {
			c.denied[j] *= s[j]
			c.deniedCost[j] *= s[j]
			c.allowed[j] *= s[j]
		}
		c.weight *= s[1]
	}
	tb.landmark = ns
}

// find is the counter of hash h (-1 when none) and the index slot where
// it is or would go.
func (tb *table) find(h uint64) (slot, i int) {
	mask := len(tb.index) - 1
	for s := int(h) & mask; ; s = (s + 1) & mask {
		v := tb.index[s]
		if v == 0 {
			return s, -1
		}
		if tb.counters[v-1].hash == h {
			return s, int(v - 1)
		}
	}
}

// take gives key k (hash h, free index slot slot) a counter: an unused
// one, or the one of least weight, whose weight it inherits. The counts of
// its own start at zero.
func take[K keySource](tb *table, h uint64, slot int, k K, ns int64) int {
	var i int
	inherited := 0.0
	if len(tb.heap) < len(tb.counters) {
		i = len(tb.heap)
		tb.heap = append(tb.heap, int32(i))
		tb.counters[i].heapPos = int32(i)
	} else {
		i = int(tb.heap[0])
		inherited = tb.counters[i].weight
		tb.unindex(tb.counters[i].hash)
		slot, _ = tb.find(h) // the removal may have moved the free slot
	}
	tb.index[slot] = int32(i + 1)
	c := &tb.counters[i]
	pos := c.heapPos
	*c = counter{hash: h, heapPos: pos, weight: inherited, first: ns}
	if tb.mac != nil {
		tb.mac.Reset()
		k.mac(tb.mac, tb.scratch[:])
		var sum [sha256.Size]byte
		hex.Encode(c.key[:], tb.mac.Sum(sum[:0])[:8])
		c.keyLen = 16
	} else {
		n, cut := k.text(c.key[:])
		c.keyLen, c.truncated = uint8(n), cut
	}
	heap.Fix(tb, int(pos))
	return i
}

// unindex removes hash h from the index (backward-shift deletion, so that
// probes need no tombstones).
func (tb *table) unindex(h uint64) {
	mask := len(tb.index) - 1
	s, i := tb.find(h)
	if i < 0 {
		return
	}
	for {
		tb.index[s] = 0
		next := s
		for {
			next = (next + 1) & mask
			v := tb.index[next]
			if v == 0 {
				return
			}
			home := int(tb.counters[v-1].hash) & mask
			// Move v back to s unless its home lies cyclically in (s, next].
			if (next > s && (home <= s || home > next)) || (next < s && home <= s && home > next) {
				tb.index[s] = v
				s = next
				break
			}
		}
	}
}

// The heap of counters by weight, least at heap[0], for container/heap.
// Its size only grows in take, so Push and Pop are never called.

func (tb *table) Len() int { return len(tb.heap) }

func (tb *table) Less(a, b int) bool {
	return tb.counters[tb.heap[a]].weight < tb.counters[tb.heap[b]].weight
}

func (tb *table) Swap(a, b int) {
	tb.heap[a], tb.heap[b] = tb.heap[b], tb.heap[a]
	tb.counters[tb.heap[a]].heapPos = int32(a)
	tb.counters[tb.heap[b]].heapPos = int32(b)
}

func (tb *table) Push(any) {}
func (tb *table) Pop() any { return nil }
