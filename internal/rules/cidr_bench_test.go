package rules

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// Benchmarks of match: cidr with 100,000 networks; bench/RESULTS.md
// records them.

// cidrBenchRequests returns n descriptors whose addresses lie inside the
// given networks (each one's first address with random host bits), so
// every lookup walks to a configured prefix.
func cidrBenchRequests(prefixes []netip.Prefix, n int, v4 bool) [][]Entry {
	rng := rand.New(rand.NewPCG(5, 6))
	reqs := make([][]Entry, 0, n)
	for len(reqs) < n {
		p := prefixes[rng.IntN(len(prefixes))]
		if p.Addr().Is4() != v4 {
			continue
		}
		b := p.Addr().As16()
		hostBits := p.Addr().BitLen() - p.Bits()
		for i := 15; hostBits > 0; i-- {
			b[i] |= byte(rng.Uint32()) & byte(1<<min(hostBits, 8)-1)
			hostBits -= 8
		}
		a := netip.AddrFrom16(b)
		if v4 {
			a = a.Unmap()
		}
		reqs = append(reqs, e("remote_address", a.String()))
	}
	return reqs
}

// BenchmarkCIDRMatch: Match against 100,000 random networks (a third
// IPv4 of lengths 8-32, the rest IPv6 of lengths 16-128), addresses
// inside them. linear_scan is the same lookup by netip.Prefix.Contains
// over every network; exact is Match on a ban list of 100,000 exact
// addresses (a map), both for the ratio. cpu-ns/op is the process's CPU
// time per op (the machine is shared: wall time is noise).
func BenchmarkCIDRMatch(b *testing.B) {
	data, prefixes := cidrBanList(100_000)
	c, err := Parse("cidr.yaml", data)
	if err != nil {
		b.Fatal(err)
	}
	for _, fam := range []struct {
		name string
		v4   bool
	}{{"v4", true}, {"v6", false}} {
		reqs := cidrBenchRequests(prefixes, 1<<14, fam.v4)
		b.Run(fam.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			defer reportCPU(b)()
			for b.Loop() {
				if c.Match("edge", reqs[i&(len(reqs)-1)]) == nil {
					b.Fatal("no match")
				}
				i++
			}
		})
		b.Run(fam.name+"/linear_scan", func(b *testing.B) {
			i := 0
			defer reportCPU(b)()
			for b.Loop() {
				a, _ := netip.ParseAddr(reqs[i&(len(reqs)-1)][0].Value)
				best := -1
				for _, p := range prefixes {
					if p.Bits() > best && p.Contains(a) {
						best = p.Bits()
					}
				}
				if best < 0 {
					b.Fatal("no match")
				}
				i++
			}
		})
	}
	exact, err := Parse("ban.yaml", banList(100_000, 0))
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([][]Entry, 1<<14)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range reqs {
		n := rng.IntN(100_000)
		reqs[i] = e("remote_address", fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255))
	}
	b.Run("exact", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		defer reportCPU(b)()
		for b.Loop() {
			if l := exact.Match("edge", reqs[i&(len(reqs)-1)]); l == nil || !l[0].DenyAll {
				b.Fatal("no ban")
			}
			i++
		}
	})
}

// BenchmarkCIDRLoad: parsing a file of 100,000 random networks (cidr) and
// one of 100,000 exact addresses (exact), and the heap the loaded Set
// keeps (retained-MB).
func BenchmarkCIDRLoad(b *testing.B) {
	cidr, _ := cidrBanList(100_000)
	for _, f := range []struct {
		name string
		data []byte
	}{{"cidr", cidr}, {"exact", banList(100_000, 0)}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			var retained float64
			defer reportCPU(b)()
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c, err := Parse("rules.yaml", f.data)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				retained = float64(after.HeapAlloc-before.HeapAlloc) / 1e6
				runtime.KeepAlive(c)
			}
			b.ReportMetric(retained, "retained-MB")
			b.ReportMetric(float64(len(f.data))/1e6, "file-MB")
		})
	}
}

// reportCPU starts measuring the process's CPU time (user and system);
// the function it returns reports it per op as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() {
		b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
