package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// benchConfig is an edge proxy's rules at a realistic size: 200 banned
// addresses over a per-address limit, 500 tenants each with path
// wildcards under them, 50 top-level path prefixes, and API keys with a
// per-second limit and a daily quota.
func benchConfig(tb testing.TB) *Set {
	var b strings.Builder
	b.WriteString("domain: edge\ndefault_algorithm: token_bucket\ndescriptors:\n")
	b.WriteString("  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 50}\n")
	for i := range 200 {
		fmt.Fprintf(&b, "  - key: remote_address\n    value: 10.9.%d.%d\n    rate_limit: {unit: second, requests_per_unit: 0}\n", i/256, i%256)
	}
	for i := range 500 {
		fmt.Fprintf(&b, "  - key: tenant\n    value: t%d\n    descriptors:\n", i)
		for j := range 5 {
			fmt.Fprintf(&b, "      - key: path\n        value: /v%d/*\n        rate_limit: {unit: minute, requests_per_unit: %d}\n", j, 100+j)
		}
		b.WriteString("      - key: path\n        rate_limit: {unit: minute, requests_per_unit: 60}\n")
	}
	for j := range 50 {
		fmt.Fprintf(&b, "  - key: path\n    value: /static/%d/*\n    rate_limit: {unit: second, requests_per_unit: 1000}\n", j)
	}
	b.WriteString("  - key: api_key\n    rate_limits:\n      - {unit: second, requests_per_unit: 10, burst: 20}\n      - {unit: day, requests_per_unit: 10000}\n")
	c, err := Parse("bench.yaml", []byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// benchRequests builds n distinct descriptors, each of which matches.
func benchRequests(tb testing.TB, c *Set, n int) [][]Entry {
	reqs := make([][]Entry, n)
	for i := range reqs {
		switch i % 4 {
		case 0:
			reqs[i] = e("remote_address", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		case 1:
			reqs[i] = e("tenant", fmt.Sprintf("t%d", i%500), "path", fmt.Sprintf("/v%d/items/%d", i%7, i))
		case 2:
			reqs[i] = e("path", fmt.Sprintf("/static/%d/app-%d.js", i%50, i))
		case 3:
			reqs[i] = e("api_key", fmt.Sprintf("key-%08d", i))
		}
	}
	seen := map[string]bool{}
	for _, r := range reqs {
		ls := c.Match("edge", r)
		if ls == nil {
			tb.Fatalf("%v matches nothing", r)
		}
		k := string(ls[0].AppendKey(nil, r))
		if seen[k] {
			tb.Fatalf("requests are not distinct: %q twice", k)
		}
		seen[k] = true
	}
	return reqs
}

func BenchmarkMatch(b *testing.B) {
	c := benchConfig(b)
	reqs := benchRequests(b, c, 1<<14)
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1 << 20)
		for pb.Next() {
			i++
			if c.Match("edge", reqs[i%uint64(len(reqs))]) == nil {
				b.Error("no match")
				return
			}
		}
	})
}

func BenchmarkMatchRequest(b *testing.B) {
	c := benchConfig(b)
	reqs := benchRequests(b, c, 1<<12)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j := i % (len(reqs) - 2)
		c.MatchRequest("edge", reqs[j:j+3])
	}
}

func BenchmarkAppendKey(b *testing.B) {
	c := benchConfig(b)
	reqs := benchRequests(b, c, 1<<12)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r := reqs[i%len(reqs)]
		buf = c.Match("edge", r)[0].AppendKey(buf[:0], r)
	}
}

func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if _, err := Load("testdata/envoy", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadBanList loads a 200,000-descriptor IP ban list (banList)
// from a file; bench/RESULTS.md records its time and memory. retained-MB
// is the heap the loaded Set keeps.
func BenchmarkLoadBanList(b *testing.B) {
	path := filepath.Join(b.TempDir(), "ban.yaml")
	if err := os.WriteFile(path, banList(200_000, 0), 0o644); err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var c *Set
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c = nil
		var err error
		if c, err = Load(path, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "retained-MB")
	runtime.KeepAlive(c)
}
