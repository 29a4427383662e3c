package loadgen

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is the machine-readable form of a Result: the JSON object that
// `floodgate bench --json` prints. The field names are stable; the package
// doc describes each.
type Report struct {
	API            string            `json:"api"`
	Target         string            `json:"target"`
	Concurrency    int               `json:"concurrency"`
	Conns          int               `json:"conns"`
	Keys           int               `json:"keys,omitempty"`
	Zipf           float64           `json:"zipf,omitempty"`
	Algorithm      string            `json:"algorithm,omitempty"`
	Limit          string            `json:"limit,omitempty"`
	Descriptors    int               `json:"descriptors,omitempty"`
	Domain         string            `json:"domain,omitempty"`
	WarmupSeconds  float64           `json:"warmup_seconds"`
	ElapsedSeconds float64           `json:"elapsed_seconds"`
	Requests       uint64            `json:"requests"`
	Allowed        uint64            `json:"allowed"`
	Denied         uint64            `json:"denied"`
	Errors         uint64            `json:"errors"`
	ErrorsByCode   map[string]uint64 `json:"errors_by_code"`
	RequestsPerSec float64           `json:"requests_per_second"`
	DecisionsPerS  float64           `json:"decisions_per_second"`
	LatencyUs      LatencySummary    `json:"latency_us"`
	Histogram      []Bin             `json:"histogram"`
	Interrupted    bool              `json:"interrupted"`
	GeneratorCPU   GeneratorCPU      `json:"generator_cpu"`
}

// GeneratorCPU is the load generator's own CPU use during the measurement
// (zeros where the platform does not report it).
type GeneratorCPU struct {
	// Cores is the CPU time used divided by the measured time: 1.0 is one
	// core busy all along.
	Cores float64 `json:"cores"`
	// UsPerRequest is the CPU time per measured request, in microseconds.
	UsPerRequest float64 `json:"us_per_request"`
}

// LatencySummary holds latencies in microseconds.
type LatencySummary struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// Bin is one bar of the latency histogram: Count requests took at least
// FromUs and less than ToUs microseconds (within precision).
type Bin struct {
	FromUs float64 `json:"from_us"`
	ToUs   float64 `json:"to_us"`
	Count  uint64  `json:"count"`
}

// Report returns r's machine-readable form.
func (r *Result) Report() Report {
	c := r.Config
	rep := Report{
		API:            c.API.String(),
		Target:         c.Target,
		Concurrency:    c.Concurrency,
		Conns:          len(r.Config.Conns),
		WarmupSeconds:  c.Warmup.Seconds(),
		ElapsedSeconds: r.Elapsed.Seconds(),
		Requests:       r.Requests(),
		Allowed:        r.Allowed,
		Denied:         r.Denied,
		Errors:         r.ErrorCount(),
		ErrorsByCode:   map[string]uint64{},
		RequestsPerSec: r.RequestRate(),
		DecisionsPerS:  r.DecisionRate(),
		Interrupted:    r.Interrupted,
		Histogram:      r.bins(),
	}
	if r.Elapsed > 0 {
		rep.GeneratorCPU.Cores = r.GeneratorCPU.Seconds() / r.Elapsed.Seconds()
	}
	rep.GeneratorCPU.UsPerRequest = float64(r.GeneratorCPUPerRequest()) / float64(time.Microsecond)
	switch c.API {
	case APICheck:
		rep.Keys, rep.Zipf = c.Keys, c.Zipf
		rep.Algorithm = c.Limit.Algorithm.String()
		rep.Limit = FormatLimit(c.Limit.Requests, c.Limit.Period)
	case APIRLS:
		rep.Keys, rep.Zipf = c.Keys, c.Zipf
		rep.Descriptors, rep.Domain = c.Descriptors, c.Domain
	}
	for code, n := range r.Errors {
		rep.ErrorsByCode[code.String()] += n
	}
	h := cmp.Or(r.Latency, new(Histogram))
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	rep.LatencyUs = LatencySummary{
		Min:  us(h.Min()),
		Mean: us(h.Mean()),
		P50:  us(h.Quantile(0.50)),
		P90:  us(h.Quantile(0.90)),
		P99:  us(h.Quantile(0.99)),
		P999: us(h.Quantile(0.999)),
		Max:  us(h.Max()),
	}
	return rep
}

// WriteJSON writes r's Report as one JSON object and a newline.
func (r *Result) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r.Report(), "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// binEdges are the histogram bars' edges within a decade: 1, 1.5, 2, 3, 5,
// 7 (×10^k ns).
var binEdges = []float64{1, 1.5, 2, 3, 5, 7}

// edge is the i-th bar edge in nanoseconds, from 1ns: 1, 1.5, 2, 3, 5, 7,
// 10, 15, ...
func edge(i int) int64 {
	return int64(binEdges[i%len(binEdges)] * math.Pow10(i/len(binEdges)))
}

// bins splits the latencies into bars from the one holding the fastest
// request to the one holding the slowest.
func (r *Result) bins() []Bin {
	h := r.Latency
	if h == nil || h.Count() == 0 {
		return []Bin{}
	}
	first := 0
	for edge(first+1) <= int64(h.Min()) {
		first++
	}
	last := first
	for edge(last+1) <= int64(h.Max()) {
		last++
	}
	bins := make([]Bin, 0, last-first+1)
	// Every value is >= Min >= edge(first), so nothing lies below the
	// first bin; countBelow(edge(first)) would count the bucket that
	// straddles that edge and holds Min, and lose it.
	var below uint64
	for i := first; i <= last; i++ {
		upto := h.countBelow(edge(i + 1))
		if i == last {
			upto = h.Count()
		}
		bins = append(bins, Bin{
			FromUs: float64(edge(i)) / 1e3,
			ToUs:   float64(edge(i+1)) / 1e3,
			Count:  upto - below,
		})
		below = upto
	}
	return bins
}

// WriteText writes the human-readable report: settings, counts, rates,
// percentiles and an ASCII latency histogram.
func (r *Result) WriteText(w io.Writer) error {
	rep := r.Report()
	var b strings.Builder
	fmt.Fprintf(&b, "floodgate bench: api=%s target=%s concurrency=%d conns=%d", rep.API, rep.Target, rep.Concurrency, rep.Conns)
	if rep.Keys > 0 {
		dist := "uniform"
		if rep.Zipf > 0 {
			dist = "zipf " + strconv.FormatFloat(rep.Zipf, 'g', -1, 64)
		}
		fmt.Fprintf(&b, " keys=%d (%s)", rep.Keys, dist)
	}
	if rep.Limit != "" {
		fmt.Fprintf(&b, " limit=%s %s", rep.Limit, rep.Algorithm)
	}
	if rep.Domain != "" {
		fmt.Fprintf(&b, " domain=%s descriptors=%d", rep.Domain, rep.Descriptors)
	}
	fmt.Fprintf(&b, "\nmeasured %s after a %s warmup", fmtDur(r.Elapsed), fmtDur(r.Config.Warmup))
	if r.Interrupted {
		b.WriteString(" (interrupted)")
	}
	b.WriteString("\n\n")
	pct := func(n uint64) string {
		if rep.Requests == 0 {
			return ""
		}
		return fmt.Sprintf("%6.2f%%", 100*float64(n)/float64(rep.Requests))
	}
	fmt.Fprintf(&b, "requests   %12d  %12.1f/s\n", rep.Requests, rep.RequestsPerSec)
	fmt.Fprintf(&b, "decisions  %12d  %12.1f/s\n", rep.Allowed+rep.Denied, rep.DecisionsPerS)
	fmt.Fprintf(&b, "  allowed  %12d  %s\n", rep.Allowed, pct(rep.Allowed))
	fmt.Fprintf(&b, "  denied   %12d  %s\n", rep.Denied, pct(rep.Denied))
	fmt.Fprintf(&b, "errors     %12d  %s\n", rep.Errors, pct(rep.Errors))
	for _, c := range slices.Sorted(maps.Keys(rep.ErrorsByCode)) {
		fmt.Fprintf(&b, "  %-17s %5d\n", c, rep.ErrorsByCode[c])
	}
	h := cmp.Or(r.Latency, new(Histogram))
	fmt.Fprintf(&b, "\nlatency    min %s  mean %s  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
		fmtDur(h.Min()), fmtDur(h.Mean()), fmtDur(h.Quantile(0.5)), fmtDur(h.Quantile(0.9)),
		fmtDur(h.Quantile(0.99)), fmtDur(h.Quantile(0.999)), fmtDur(h.Max()))
	if r.GeneratorCPU > 0 {
		fmt.Fprintf(&b, "generator  %s CPU per request, %.2f cores (the load generator's own cost)\n",
			fmtDur(r.GeneratorCPUPerRequest()), rep.GeneratorCPU.Cores)
	}
	if len(rep.Histogram) > 0 {
		b.WriteString("\nlatency histogram (requests per bucket, cumulative %)\n")
		var most uint64
		for _, bin := range rep.Histogram {
			most = max(most, bin.Count)
		}
		const width = 40
		var cum uint64
		for _, bin := range rep.Histogram {
			cum += bin.Count
			bar := int((bin.Count*width + most - 1) / most) // most > 0: the bars hold every latency
			fmt.Fprintf(&b, "  %8s - %-8s %10d  %6.2f%%  %s\n",
				fmtDur(time.Duration(bin.FromUs*1e3)), fmtDur(time.Duration(bin.ToUs*1e3)),
				bin.Count, 100*float64(cum)/float64(h.Count()), strings.Repeat("#", bar))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String is a one-line progress report, e.g. "measuring 3.0s: 301234
// requests, 100411/s".
func (p Progress) String() string {
	what := "measuring"
	if p.Warmup {
		what = "warming up"
	}
	return fmt.Sprintf("%s %s: %d requests, %.0f/s", what, fmtDur(p.Elapsed.Truncate(100*time.Millisecond)), p.Requests, p.Rate)
}

// fmtDur formats a latency with three significant digits: 87µs, 1.23ms.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'g', 3, 64) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/1e6, 'g', 3, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'g', 3, 64) + "s"
}

// FormatLimit writes a rate as REQUESTS/PERIOD, as the CLI's --limit
// reads it, with the period in its largest whole unit:
// FormatLimit(10, time.Minute) is "10/1m".
func FormatLimit(requests int64, period time.Duration) string {
	return strconv.FormatInt(requests, 10) + "/" + formatPeriod(period)
}

// formatPeriod writes a period in its largest whole unit (h, m, s or ms),
// e.g. "1m" or "1500ms"; a form both time.ParseDuration and the config's
// `period` field read.
func formatPeriod(d time.Duration) string {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.unit && d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.name
		}
	}
	return d.String()
}
