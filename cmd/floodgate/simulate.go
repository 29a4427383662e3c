package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/simulate"
)

// Exit statuses of `floodgate simulate`.
const (
	// simulateExitError: the chart could not be written.
	simulateExitError = 1
	// simulateExitUsage: bad flags or a bad --traffic spec.
	simulateExitUsage = 2
)

// simulateSynopsis is simulate's help text; the algorithms it names are
// read from their table.
func simulateSynopsis() string {
	waits := algorithms.Which(func(f algorithms.Facts) bool { return f.Waits })
	return fmt.Sprintf(`Runs a traffic pattern through floodgate's own algorithms on a virtual clock
(no server, no Redis) and prints a timeline of the admitted and denied
requests; --svg also draws it as a chart.

  floodgate simulate --algorithm %[1]s --limit 10/1m --traffic edge
  floodgate simulate --algorithm %[2]s --limit 10/1m --burst 20 \
      --traffic 'steady:20/1m for 3m, burst:15 at 90s' --svg tb.svg

--limit and --algorithm are those of "floodgate check". The clock starts at a
window edge (time 0); every request costs 1. The admitted requests of
%[3]s are drawn when they start, after their wait in its queue.
--traffic is a comma-separated list of segments, with times from the start
as Go durations (90s, 1m30s); segments may overlap:

  steady:RATE for DURATION [at TIME]   RATE requests evenly spaced from TIME
                                       (default 0) for DURATION; RATE is
                                       written like --limit: 2/s, 30/1m
  burst:N at TIME                      N requests at the same instant
  edge [at TIME]                       the window-edge attack: the limit's
                                       requests a sixtieth of the period
                                       before the window edge at TIME
                                       (default: the first edge, one period)
                                       and as many again at the edge

The simulation runs to the end of the last segment, rounded up to a whole
period. Exit status: 0 on success, 1 if the chart cannot be written, 2 on
bad flags or a bad --traffic.`,
		algorithms.Compatible, algorithms.Default, algorithms.Names(waits, "or", algorithms.Algorithm.String))
}

// simulateFlags are the settings of `floodgate simulate`.
type simulateFlags struct {
	algorithm string
	limit     string
	burst     int64
	traffic   string
	svg       string
}

func (f *simulateFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.algorithm, "algorithm", algorithms.Default.String(), algorithms.Names(algorithms.All(), "or", algorithms.Algorithm.String))
	fs.StringVar(&f.limit, "limit", "", "REQUESTS/PERIOD, e.g. 10/1m, as for check (required)")
	fs.Int64Var(&f.burst, "burst", 0, burstUsage())
	fs.StringVar(&f.traffic, "traffic", "", "the traffic pattern, e.g. 'steady:2/s for 60s, burst:10 at 55s' or edge (required; see above)")
	fs.StringVar(&f.svg, "svg", "", "also write the chart to this SVG file")
}

func runSimulate(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var f simulateFlags
	fs := newFlagSet("simulate [flags]", simulateSynopsis(), stdout)
	f.register(fs)
	if err := parseCommand(fs, args, getenv, stderr); err != nil {
		return err
	}
	res, title, err := f.run()
	if err != nil {
		return failed(stderr, "simulate", simulateExitUsage, err)
	}
	if err := simulate.WriteText(stdout, res, title); err != nil {
		return err
	}
	if f.svg == "" {
		return nil
	}
	var buf bytes.Buffer
	if err := simulate.WriteSVG(&buf, res, title); err != nil {
		return err
	}
	if err := os.WriteFile(f.svg, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(stderr, "floodgate simulate: --svg:", err)
		return exitCode(simulateExitError)
	}
	return nil
}

// run checks the flags, runs the simulation and returns its result with a
// title naming what ran. Every error is a usage error naming its flag.
func (f *simulateFlags) run() (simulate.Result, string, error) {
	var none simulate.Result
	alg, err := algorithms.ParseAlgorithm(f.algorithm)
	if err != nil {
		return none, "", fmt.Errorf("--algorithm: %w", err)
	}
	if f.limit == "" {
		return none, "", errors.New("--limit is required, e.g. --limit 10/1m")
	}
	requests, period, err := parseRate(f.limit)
	if err != nil {
		return none, "", fmt.Errorf("--limit: %w", err)
	}
	if takers := algorithms.Which(func(f algorithms.Facts) bool { return f.Burst != "" }); f.burst != 0 && alg.Facts().Burst == "" {
		return none, "", fmt.Errorf("--burst applies to %s, not %s", algorithms.Names(takers, "and", algorithms.Algorithm.String), alg)
	}
	limit := algorithms.Limit{Algorithm: alg, Requests: requests, Period: period, Burst: f.burst}
	if err := limit.Validate(); err != nil {
		return none, "", fmt.Errorf("--limit %s with --algorithm %s: %w", f.limit, alg, err)
	}
	if f.traffic == "" {
		return none, "", errors.New("--traffic is required, e.g. --traffic 'steady:2/s for 60s, burst:10 at 55s' or --traffic edge")
	}
	traffic, err := parseTraffic(f.traffic, limit)
	if err != nil {
		return none, "", fmt.Errorf("--traffic: %w", err)
	}
	res, err := simulate.Run(limit, traffic)
	if err != nil {
		return none, "", err
	}
	title := fmt.Sprintf("%s %s", alg, f.limit)
	if f.burst != 0 {
		title += fmt.Sprintf(" burst %d", f.burst)
	}
	return res, title + fmt.Sprintf(", traffic %q", f.traffic), nil
}

// parseTraffic reads a --traffic spec (see simulateSynopsis) for limit l.
func parseTraffic(spec string, l algorithms.Limit) (simulate.Traffic, error) {
	var segments []simulate.Segment
	for i, part := range strings.Split(spec, ",") {
		s, err := parseSegment(strings.Fields(part), l)
		if err != nil {
			return simulate.Traffic{}, fmt.Errorf("segment %d %q: %w", i+1, strings.TrimSpace(part), err)
		}
		segments = append(segments, s)
	}
	return simulate.Join(l.Period, segments...)
}

// parseSegment reads one segment, already split into words.
func parseSegment(words []string, l algorithms.Limit) (simulate.Segment, error) {
	var none simulate.Segment
	if len(words) == 0 {
		return none, errors.New("empty segment (two commas in a row, or one at an end?)")
	}
	kind, arg, hasArg := strings.Cut(words[0], ":")
	want := map[string][]string{"steady": {"for", "at"}, "burst": {"at"}, "edge": {"at"}}
	keywords, ok := want[kind]
	if !ok {
		return none, fmt.Errorf("unknown segment %q: want steady:RATE for DURATION [at TIME], burst:N at TIME or edge [at TIME]", kind)
	}
	opts, err := parseOptions(words[1:], keywords)
	if err != nil {
		return none, err
	}
	switch kind {
	case "steady":
		if !hasArg || arg == "" {
			return none, errors.New("steady needs a rate, e.g. steady:2/s for 60s")
		}
		requests, period, err := parseRate(arg)
		if err != nil {
			return none, fmt.Errorf("rate: %w", err)
		}
		length, ok := opts["for"]
		if !ok {
			return none, errors.New("steady needs a length, e.g. steady:2/s for 60s")
		}
		return simulate.Steady(requests, period, opts["at"], length)
	case "burst":
		if !hasArg || arg == "" {
			return none, errors.New("burst needs a count, e.g. burst:10 at 55s")
		}
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n <= 0 {
			return none, fmt.Errorf("burst count must be a positive integer, got %q", arg)
		}
		at, ok := opts["at"]
		if !ok {
			return none, errors.New("burst needs a time, e.g. burst:10 at 55s")
		}
		return simulate.Burst(n, at)
	default: // edge
		if hasArg {
			return none, fmt.Errorf("edge takes no value, got edge:%s (its size is the limit's requests)", arg)
		}
		at, ok := opts["at"]
		if !ok {
			at = l.Period
		}
		return simulate.Edge(l, at)
	}
}

// parseOptions reads "KEYWORD DURATION" pairs, allowing only the given
// keywords, each at most once.
func parseOptions(words, keywords []string) (map[string]time.Duration, error) {
	opts := map[string]time.Duration{}
	for i := 0; i < len(words); i += 2 {
		kw := words[i]
		switch {
		case !slices.Contains(keywords, kw):
			return nil, fmt.Errorf("unexpected %q (this segment takes %s)", kw, strings.Join(keywords, ", "))
		case i+1 == len(words):
			return nil, fmt.Errorf("%q needs a duration after it", kw)
		}
		if _, dup := opts[kw]; dup {
			return nil, fmt.Errorf("%q given twice", kw)
		}
		d, err := time.ParseDuration(words[i+1])
		if err != nil {
			return nil, fmt.Errorf("%s: want a duration such as 30s or 1m30s, got %q", kw, words[i+1])
		}
		opts[kw] = d
	}
	return opts, nil
}
