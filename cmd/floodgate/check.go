package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/internal/simulate"
)

// Exit statuses of `floodgate check`.
const (
	// checkExitError: floodgate could not be asked or could not decide.
	checkExitError = 1
	// checkExitUsage: bad flags.
	checkExitUsage = 2
	// checkExitDenied: with --fail-on-deny, some attempt was denied.
	checkExitDenied = 3
)

// checkSynopsis is check's help text; the algorithms it names are read
// from their table.
func checkSynopsis() string {
	window := algorithms.Which(func(f algorithms.Facts) bool { return f.Window })
	waits := algorithms.Which(func(f algorithms.Facts) bool { return f.Waits })
	smooth := algorithms.Which(func(f algorithms.Facts) bool { return f.Window && !f.Afresh })
	return fmt.Sprintf(`Asks a running floodgate whether KEY may spend COST now, REPEAT times in a
row, and prints one row per attempt (or one JSON object per line with --json).
With --domain it asks Envoy's API instead (ShouldRateLimit, the limits of the
server's rules) and prints each answer's overall code and every descriptor's
status (or the response as JSON, one per line).

  floodgate check --key user:1 --limit 10/1m --algorithm %[1]s --repeat 12
  floodgate check --key login:alice --policy login --json
  floodgate check --key partner --limit 10/1s --algorithm %[2]s --repeat 5
  floodgate check --domain shop --descriptor path=/login,user=alice --descriptor remote_address=10.0.0.1 --repeat 3

--limit is REQUESTS/PERIOD with a Go duration or a bare unit: 10/1m, 5/15m,
100/h; or a calendar period, 10000/calendar_month (also calendar_day,
calendar_week, calendar_year), counted in --time-zone (default UTC) with
%[3]s unless --algorithm names another that counts in windows
(%[4]s). A limit of %[5]s admits with a WAIT
(the attempt's slot; check does not sleep it) and denies only when its
queue (--burst) is full.

Exit status: 0 when every attempt got an answer, allowed or denied; 1 on
an error (unreachable, invalid request, unknown policy); 2 on bad flags;
3 with --fail-on-deny when some attempt was denied (OVER_LIMIT with --domain).`,
		smooth[0], waits[0], algorithms.Compatible,
		algorithms.Names(window, "or", algorithms.Algorithm.String),
		algorithms.Names(waits, "or", algorithms.Algorithm.String))
}

// checkFlags are the settings of `floodgate check`: the flags it shares
// with settle, and the attempts.
type checkFlags struct {
	callFlags
	cost       int64
	repeat     int
	interval   time.Duration
	json       bool
	failOnDeny bool
	envoy      envoyFlags
}

func (f *checkFlags) register(fs *pflag.FlagSet) {
	f.registerTarget(fs, "the key to check, e.g. user:42 (required, unless --domain asks Envoy's API)", "inline limit REQUESTS/PERIOD, e.g. 10/1m or 10000/calendar_month (this or --policy)")
	f.registerConn(fs, "bound on each call", "bearer token sent as authorization metadata (needs TLS unless --addr is loopback)")
	fs.Int64Var(&f.cost, "cost", 1, "units each attempt spends")
	fs.IntVar(&f.repeat, "repeat", 1, "how many attempts to make")
	fs.DurationVar(&f.interval, "interval", 0, "pause between attempts")
	fs.BoolVar(&f.json, "json", false, "print one JSON object per attempt instead of a table")
	fs.BoolVar(&f.failOnDeny, "fail-on-deny", false, "exit 3 if any attempt was denied (for scripts)")
	f.envoy.register(fs)
}

// checkRow is one attempt, as printed with --json.
type checkRow struct {
	Attempt      int   `json:"attempt"`
	Allowed      bool  `json:"allowed"`
	Limit        int64 `json:"limit"`
	Remaining    int64 `json:"remaining"`
	RetryAfterMs int64 `json:"retry_after_ms"`
	ResetAfterMs int64 `json:"reset_after_ms"`
	// WaitMs is the wait until the attempt's slot of an algorithm that
	// admits with a wait (algorithms.Facts.Waits); 0 for the others.
	WaitMs   int64 `json:"wait_ms"`
	Degraded bool  `json:"degraded"`
}

func runCheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var f checkFlags
	fs := newFlagSet("check [flags]", checkSynopsis(), stdout)
	f.register(fs)
	if err := parseCommand(fs, args, getenv, stderr); err != nil {
		return err
	}
	if f.envoy.domain != "" {
		req, err := f.envoyRequest(fs)
		if err != nil {
			return failed(stderr, "check", checkExitUsage, err)
		}
		return runCheckEnvoy(ctx, &f, req, stdout, stderr)
	}
	limit, opts, err := f.resolve(f.attempts)
	if err != nil {
		return failed(stderr, "check", checkExitUsage, err)
	}
	c, err := client.Dial(f.addr, opts...)
	if err != nil {
		return failed(stderr, "check", checkExitError, err)
	}
	defer c.Close()

	// One JSON object per attempt, or a table (its header dropped, being
	// buffered, when no attempt is made) and a summary line.
	enc, tw := json.NewEncoder(stdout), tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tALLOWED\tREMAINING\tLIMIT\tRETRY AFTER\tRESET AFTER\tWAIT")
	denied := 0
	done, err := f.eachAttempt(ctx, func(i int) error {
		d, err := c.Check(ctx, client.Request{Key: f.key, Limit: limit, Cost: f.cost})
		if err != nil {
			fmt.Fprintf(stderr, "floodgate check: attempt %d: %s\n", i, describeError(err))
			return exitCode(checkExitError)
		}
		allowed := "yes"
		if !d.Allowed {
			denied++
			allowed = "no"
		}
		if f.json {
			return enc.Encode(checkRow{Attempt: i, Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining,
				RetryAfterMs: d.RetryAfter.Milliseconds(), ResetAfterMs: d.ResetAfter.Milliseconds(), WaitMs: d.Wait.Milliseconds(), Degraded: d.Degraded})
		}
		if d.Degraded { // the store could not decide; the failure mode answered
			allowed += " (degraded)"
		}
		ms := func(d time.Duration) string { return simulate.ShortDuration(d.Truncate(time.Millisecond)) } // as in JSON
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\n", i, allowed, d.Remaining, d.Limit, ms(d.RetryAfter), ms(d.ResetAfter), ms(d.Wait))
		return nil
	})
	if !f.json && done > 0 {
		_ = tw.Flush()
		fmt.Fprintf(stdout, "%d of %d allowed\n", done-denied, done)
	}
	if err != nil {
		return err
	}
	if f.failOnDeny && denied > 0 {
		return exitCode(checkExitDenied)
	}
	return nil
}

// eachAttempt runs attempt for attempts 1 to --repeat, --interval apart,
// until one fails or ctx ends; done is how many succeeded.
func (f *checkFlags) eachAttempt(ctx context.Context, attempt func(i int) error) (done int, err error) {
	for i := 1; i <= f.repeat; i++ {
		if i > 1 && f.interval > 0 {
			select {
			case <-ctx.Done():
				return i - 1, ctx.Err()
			case <-time.After(f.interval):
			}
		}
		if err := attempt(i); err != nil {
			return i - 1, err
		}
	}
	return f.repeat, nil
}

// attempts checks the flags of the attempts.
func (f *checkFlags) attempts() error {
	switch {
	case f.repeat < 1:
		return fmt.Errorf("--repeat must be at least 1, got %d", f.repeat)
	case f.cost < 1:
		return fmt.Errorf("--cost must be at least 1, got %d", f.cost)
	case f.envoy.domain == "" && (len(f.envoy.descriptors) > 0 || f.envoy.hits != 1):
		return errors.New("--descriptor and --hits go with --domain (Envoy's API)")
	}
	return nil
}

// parseRate reads REQUESTS/PERIOD: "10/1m", "5/15m", "100/h", "1000/1d",
// "10/day" (a bare unit means one of it). PERIOD is a Go duration
// (1m30s) or a count and one unit of ms, s, m, h or d, the units also
// spelled out (sec, second, min, minute, hour, day, with or without s).
func parseRate(s string) (int64, time.Duration, error) {
	reqs, per, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("want REQUESTS/PERIOD such as 10/1m or 1000/day, got %q", s)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(reqs), 10, 64)
	if err != nil || n <= 0 {
		return 0, 0, fmt.Errorf("requests must be a positive integer, got %q", reqs)
	}
	d, err := parsePeriod(strings.TrimSpace(per))
	if err != nil {
		return 0, 0, err
	}
	return n, d, nil
}

// periodUnits are the units parsePeriod takes beyond Go's durations.
var periodUnits = map[string]time.Duration{
	"ms": time.Millisecond, "millisecond": time.Millisecond,
	"s": time.Second, "sec": time.Second, "second": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour,
}

// parsePeriod reads a positive period: a Go duration, or COUNT UNIT with
// COUNT optional (1) and UNIT one of periodUnits, plural allowed.
func parsePeriod(per string) (time.Duration, error) {
	bad := fmt.Errorf("period must be a positive duration such as 1s, 15m, 1h, 1d or day, got %q", per)
	if d, err := time.ParseDuration(per); err == nil {
		if d <= 0 {
			return 0, bad
		}
		return d, nil
	}
	digits := strings.TrimLeft(per, "0123456789")
	count := int64(1)
	if num := per[:len(per)-len(digits)]; num != "" {
		c, err := strconv.ParseInt(num, 10, 64)
		if err != nil || c <= 0 {
			return 0, bad
		}
		count = c
	}
	unit := strings.TrimSpace(digits)
	u, ok := periodUnits[unit]
	if !ok && len(unit) > 2 {
		u, ok = periodUnits[strings.TrimSuffix(unit, "s")]
	}
	if !ok || count > int64(1<<62)/int64(u) {
		return 0, bad
	}
	return time.Duration(count) * u, nil
}

// describeError is an error for people: the gRPC code and message, or the
// error itself. An HTTP/1 server's answer to gRPC's HTTP/2 preface (grpc-go
// reports "frame too large" or a bad preface) is said to be the HTTP port.
func describeError(err error) string {
	msg := err.Error()
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		st := gs.GRPCStatus()
		msg = fmt.Sprintf("%v: %s", st.Code(), st.Message())
	}
	if strings.Contains(msg, "frame too large") || strings.Contains(msg, "server preface") {
		msg += " (this looks like an HTTP/1 port, such as floodgate's --http-addr: --addr takes the gRPC port, --grpc-addr, 127.0.0.1:8081 by default)"
	}
	return msg
}
