package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/simulate"
)

// TestSimulateGolden pins `floodgate simulate`'s output against
// testdata/simulate/*.golden (`-update` rewrites them).
func TestSimulateGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"edge_fixed_window", []string{"--algorithm", "fixed_window", "--limit", "10/1m", "--traffic", "edge"}, nil},
		{"edge_sliding_window", []string{"--algorithm", "sliding_window", "--limit", "10/1m", "--traffic", "edge"}, nil},
		{"steady_and_burst", []string{"--algorithm", "sliding_window_log", "--limit", "10/1m", "--traffic", "steady:10/1m for 2m, burst:10 at 55s"}, nil},
		{"token_bucket_burst", []string{"--limit", "10/m", "--burst", "20", "--traffic", "burst:25 at 0s, steady:1/5s for 1m at 1m"}, nil},
		{"env", nil, map[string]string{"FLOODGATE_ALGORITHM": "fixed_window", "FLOODGATE_LIMIT": "5/2s", "FLOODGATE_TRAFFIC": "edge at 4s"}},
		{"usage_traffic", []string{"--limit", "10/1m", "--traffic", "steady:2/s for 60s, burst:10 at 55s, edge at 90s"}, nil},
		{"usage_no_limit", []string{"--traffic", "edge"}, nil},
		{"help", []string{"--help"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(append([]string{"simulate"}, tc.args...), tc.env)
			var got strings.Builder
			fmt.Fprintf(&got, "$ %s\n", strings.Join(append([]string{"floodgate", "simulate"}, tc.args...), " "))
			for _, k := range slices.Sorted(maps.Keys(tc.env)) {
				fmt.Fprintf(&got, "$ # with %s=%s\n", k, tc.env[k])
			}
			fmt.Fprintf(&got, "exit %d\n-- stdout --\n%s-- stderr --\n%s", code, stdout, stderr)
			compareGolden(t, filepath.Join("testdata", "simulate", tc.name+".golden"), got.String())
		})
	}
}

// TestSimulateUsageErrors: every bad flag or spec is a one-line message
// naming what is wrong, exit status 2, nothing on stdout (and no panic).
func TestSimulateUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--traffic", "edge"}, "--limit is required"},
		{[]string{"--limit", "10/1m"}, "--traffic is required"},
		{[]string{"--limit", "10/fortnight", "--traffic", "edge"}, "--limit: period must be a positive duration"},
		{[]string{"--limit", "ten/1m", "--traffic", "edge"}, "--limit: requests must be a positive integer"},
		{[]string{"--limit", "3/1500us", "--algorithm", "fixed_window", "--traffic", "edge"}, "whole number of milliseconds"},
		{[]string{"--limit", "20000/1m", "--algorithm", "sliding_window_log", "--traffic", "edge"}, "exceeds the sliding_window_log cap"},
		{[]string{"--limit", "10/1m", "--algorithm", "leaky", "--traffic", "edge"}, `--algorithm: unknown algorithm "leaky"`},
		{[]string{"--limit", "10/1m", "--algorithm", "sliding_window", "--burst", "20", "--traffic", "edge"}, "--burst applies to token_bucket and leaky_bucket, not sliding_window"},
		{[]string{"--limit", "10/1m", "--burst", "-1", "--traffic", "edge"}, "burst must not be negative"},
		{[]string{"--limit", "10/1m", "--traffic", "edge", "extra"}, `unexpected argument "extra"`},
		{[]string{"--limit", "10/1m", "--traffic", "wave:3"}, `segment 1 "wave:3": unknown segment "wave"`},
		{[]string{"--limit", "10/1m", "--traffic", "edge,,edge at 2m"}, "segment 2 \"\": empty segment"},
		{[]string{"--limit", "10/1m", "--traffic", "edge,"}, "segment 2 \"\": empty segment"},
		{[]string{"--limit", "10/1m", "--traffic", " "}, "segment 1 \"\": empty segment"},
		{[]string{"--limit", "10/1m", "--traffic", "steady for 1m"}, "steady needs a rate"},
		{[]string{"--limit", "10/1m", "--traffic", "steady:2/s"}, "steady needs a length"},
		{[]string{"--limit", "10/1m", "--traffic", "steady:2/fortnight for 1m"}, "rate: period must be a positive duration"},
		{[]string{"--limit", "10/1m", "--traffic", "steady:0/s for 1m"}, "rate: requests must be a positive integer"},
		{[]string{"--limit", "10/1m", "--traffic", "steady:2/s for"}, `"for" needs a duration`},
		{[]string{"--limit", "10/1m", "--traffic", "steady:2/s for soon"}, `for: want a duration such as 30s or 1m30s, got "soon"`},
		{[]string{"--limit", "10/1m", "--traffic", "steady:2/s for 1m for 2m"}, `"for" given twice`},
		{[]string{"--limit", "10/1m", "--traffic", "steady:2/s for -1m"}, "positive length"},
		{[]string{"--limit", "10/1m", "--traffic", "steady:2/s for 1m at 1.5ms"}, "whole number of milliseconds"},
		{[]string{"--limit", "10/1m", "--traffic", "steady:1000/1ms for 1h"}, "more than 100000 requests"},
		{[]string{"--limit", "10/1m", "--traffic", "burst:10"}, "burst needs a time"},
		{[]string{"--limit", "10/1m", "--traffic", "burst at 5s"}, "burst needs a count"},
		{[]string{"--limit", "10/1m", "--traffic", "burst:many at 5s"}, `burst count must be a positive integer, got "many"`},
		{[]string{"--limit", "10/1m", "--traffic", "burst:0 at 5s"}, "burst count must be a positive integer"},
		{[]string{"--limit", "10/1m", "--traffic", "burst:10 for 5s"}, `unexpected "for" (this segment takes at)`},
		{[]string{"--limit", "10/1m", "--traffic", "burst:10 at -5s"}, "must not be negative"},
		{[]string{"--limit", "10/1m", "--traffic", "edge at 90s"}, "a positive multiple of the period 1m0s, got 1m30s"},
		{[]string{"--limit", "10/1m", "--traffic", "edge:20"}, "edge takes no value"},
		{[]string{"--limit", "10/1ms", "--traffic", "edge"}, "period of at least 2ms"},
		{[]string{"--limit", "10/1m", "--traffic", "burst:1 at 9000h"}, "at most 8784h0m0s"},
		{[]string{"--limit", "10/1m", "--traffic", "burst:60000 at 0s, burst:60000 at 1s"}, "more than 100000 requests in all"},
	} {
		code, stdout, stderr := runCLI(append([]string{"simulate"}, tc.args...), nil)
		if code != simulateExitUsage || stdout != "" || !strings.Contains(stderr, tc.want) || !strings.HasPrefix(stderr, "floodgate simulate: ") {
			t.Errorf("simulate %q: got exit %d, stdout %q, stderr %q; want exit 2, no stdout, \"floodgate simulate: ...%s...\"", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// TestParseTraffic: what specs mean, in requests and span.
func TestParseTraffic(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Minute}
	for _, tc := range []struct {
		spec     string
		requests int
		first    time.Duration
		last     time.Duration
		span     time.Duration
	}{
		{"steady:2/s for 60s", 120, 0, 59500 * time.Millisecond, time.Minute},
		{"burst:10 at 55s", 10, 55 * time.Second, 55 * time.Second, time.Minute},
		{"edge", 20, 59 * time.Second, time.Minute, 2 * time.Minute},
		{"edge at 3m", 20, 179 * time.Second, 3 * time.Minute, 4 * time.Minute},
		{"  steady:30/1m  for 1m at 1m ,burst:3 at 0s", 33, 0, 118 * time.Second, 2 * time.Minute},
		{"steady:1/h for 1h at 10s", 1, 10 * time.Second, 10 * time.Second, time.Hour + time.Minute},
	} {
		tr, err := parseTraffic(tc.spec, l)
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		n := len(tr.Arrivals)
		if n != tc.requests || tr.Arrivals[0] != tc.first || tr.Arrivals[n-1] != tc.last || tr.Span != tc.span {
			t.Errorf("%q: got %d requests from %v to %v over %v; want %d from %v to %v over %v",
				tc.spec, n, tr.Arrivals[0], tr.Arrivals[n-1], tr.Span, tc.requests, tc.first, tc.last, tc.span)
		}
	}
}

// TestSimulateSVG: --svg writes the very chart WriteSVG draws; a file that
// cannot be written is exit status 1, after the timeline.
func TestSimulateSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.svg")
	args := []string{"simulate", "--algorithm", "sliding_window", "--limit", "10/1m", "--traffic", "edge", "--svg", path}
	code, stdout, stderr := runCLI(args, nil)
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "sliding_window 10/1m, traffic \"edge\"\n") {
		t.Fatalf("got exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := simulateFlags{algorithm: "sliding_window", limit: "10/1m", traffic: "edge"}
	res, title, err := f.run()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := simulate.WriteSVG(&want, res, title); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("--svg wrote\n%s\nwant\n%s", got, want.Bytes())
	}

	args[len(args)-1] = filepath.Join(t.TempDir(), "missing", "chart.svg")
	code, stdout, stderr = runCLI(args, nil)
	if code != simulateExitError || stdout == "" || !strings.HasPrefix(stderr, "floodgate simulate: --svg: ") {
		t.Errorf("unwritable --svg: got exit %d, stdout %q, stderr %q; want exit 1 after the timeline", code, stdout, stderr)
	}
}

// The README's charts ("Choosing an algorithm"): every algorithm under one
// limit and one traffic pattern, in docs/img/simulate-ALGORITHM.svg.
const (
	chartLimit   = "10/1m"
	chartTraffic = "edge, steady:20/1m for 2m at 3m"
	chartDir     = "docs/img"
)

// TestChartsUpToDate redraws the README's charts in memory and fails if a
// checked-in one differs; `make charts` (this test with -update) rewrites
// them. A new algorithm in algorithms.All() gets its chart here and
// must be shown in the README.
func TestChartsUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range algorithms.All() {
		f := simulateFlags{algorithm: a.String(), limit: chartLimit, traffic: chartTraffic}
		res, title, err := f.run()
		if err != nil {
			t.Fatalf("%v: %v", a, err)
		}
		var svg bytes.Buffer
		if err := simulate.WriteSVG(&svg, res, title); err != nil {
			t.Fatal(err)
		}
		name := chartDir + "/simulate-" + a.String() + ".svg"
		path := filepath.Join(root, filepath.FromSlash(name))
		if updateGolden() {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, svg.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if old, err := os.ReadFile(path); err != nil || !bytes.Equal(old, svg.Bytes()) {
			t.Errorf("%s is missing or out of date: run `make charts`", name)
		}
		if !bytes.Contains(readme, []byte("("+name+")")) {
			t.Errorf("README.md does not show %s: add it to \"Choosing an algorithm\"", name)
		}
	}
	if cmd := fmt.Sprintf("--limit %s --traffic '%s'", chartLimit, chartTraffic); !bytes.Contains(readme, []byte(cmd)) {
		t.Errorf("README.md does not give the charts' command (%s): update it with chartLimit and chartTraffic", cmd)
	}
}

// TestReadmeSimulateExample: the README's terminal example is what the
// command prints.
func TestReadmeSimulateExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"simulate", "--algorithm", "fixed_window", "--limit", "10/1m", "--traffic", "edge"}
	code, stdout, stderr := runCLI(args, nil)
	if code != 0 || stderr != "" {
		t.Fatalf("got exit %d, stderr %q", code, stderr)
	}
	example := "$ floodgate " + strings.Join(args, " ") + "\n" + stdout
	if !bytes.Contains(readme, []byte(example)) {
		t.Errorf("README.md lacks the example as the command prints it:\n%s", example)
	}
}

// FuzzSimulate: no spec, under any valid limit, panics, loops for long or
// draws an invalid chart; a spec is either an error or a drawable pattern.
func FuzzSimulate(f *testing.F) {
	for _, s := range []string{"edge", "steady:2/s for 60s, burst:10 at 55s", "edge at 3m, steady:1/h for 9h at 1ms", "burst:1 at 0s,,", "steady:7/13ms for 1s at 5ms"} {
		f.Add(s, int64(10), int64(60_000), uint8(0))
	}
	f.Fuzz(func(t *testing.T, spec string, requests, periodMs int64, alg uint8) {
		l := algorithms.Limit{
			Algorithm: algorithms.All()[int(alg)%len(algorithms.All())],
			Requests:  requests,
			Period:    time.Duration(periodMs) * time.Millisecond,
		}
		if l.Validate() != nil || periodMs > int64(simulate.MaxSpan/time.Millisecond) {
			return
		}
		tr, err := parseTraffic(spec, l)
		if err != nil {
			return
		}
		res, err := simulate.Run(l, tr)
		if err != nil {
			t.Fatalf("%q parsed but does not run: %v", spec, err)
		}
		if err := simulate.WriteText(io.Discard, res, spec); err != nil {
			t.Fatal(err)
		}
		var svg bytes.Buffer
		if err := simulate.WriteSVG(&svg, res, spec); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(svg.String(), "NaN") || strings.Contains(svg.String(), "Inf") {
			t.Fatalf("%q: the chart has a NaN or Inf coordinate", spec)
		}
	})
}
