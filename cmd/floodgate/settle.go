package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/internal/simulate"
)

const settleSynopsis = `Settles usage known only afterwards (an LLM call's tokens) with a running
floodgate: ACTUAL units, of which RESERVED were charged by an earlier check
(0: none). The difference goes into debt (admitted even past the limit;
checks are then denied until the limit's rate repays it) or is given back.

  floodgate check  --key tenant:a --limit 1000/1m --cost 300          # reserve an estimate
  floodgate settle --key tenant:a --limit 1000/1m --reserved 300 --actual 1500 --idempotency-key req-1

A settle is charged once per --idempotency-key (remembered for the server's
--settle-window): run it again with the same key and numbers and nothing
more is charged (duplicate). Without --idempotency-key a random one is made
and printed, to retry with. Exit status: 0 when answered; 1 on an error
(unreachable, invalid request, the key reused with other numbers); 2 on
bad flags.`

// settleFlags are the settings of `floodgate settle`: the flags it shares
// with check, and the settlement.
type settleFlags struct {
	callFlags
	reserved       int64
	actual         int64
	idempotencyKey string
	json           bool
}

func (f *settleFlags) register(fs *pflag.FlagSet) {
	f.registerTarget(fs, "the key to settle, e.g. tenant:42 (required)", "inline limit REQUESTS/PERIOD, e.g. 1000/1m, as the reserving check's (this or --policy)")
	f.registerConn(fs, "bound on the call", "bearer token sent as authorization metadata (needs TLS unless --addr is loopback; a refund needs the refund role)")
	fs.Int64Var(&f.reserved, "reserved", 0, "units the earlier check charged for this work (0: nothing reserved)")
	fs.Int64Var(&f.actual, "actual", 0, "units actually used (required, >= 0)")
	fs.StringVar(&f.idempotencyKey, "idempotency-key", "", "names this settlement, 1-128 bytes: a retry with it charges nothing again (default: a random one, printed)")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of a table")
}

// settleRow is the answer, as printed with --json.
type settleRow struct {
	IdempotencyKey string `json:"idempotency_key"`
	Limit          int64  `json:"limit"`
	Remaining      int64  `json:"remaining"`
	Debt           int64  `json:"debt"`
	Unrecorded     int64  `json:"unrecorded"`
	RetryAfterMs   int64  `json:"retry_after_ms"`
	ResetAfterMs   int64  `json:"reset_after_ms"`
	Duplicate      bool   `json:"duplicate"`
	Degraded       bool   `json:"degraded"`
}

func runSettle(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var f settleFlags
	fs := newFlagSet("settle [flags]", settleSynopsis, stdout)
	f.register(fs)
	if err := parseCommand(fs, args, getenv, stderr); err != nil {
		return err
	}
	limit, opts, err := f.resolve(nil)
	if err == nil {
		err = f.validate(fs.Changed("actual") || getenv(envName("actual")) != "")
	}
	if err != nil {
		return failed(stderr, "settle", checkExitUsage, err)
	}
	c, err := client.Dial(f.addr, opts...)
	if err != nil {
		return failed(stderr, "settle", checkExitError, err)
	}
	defer c.Close()
	s, err := c.Settle(ctx, f.key, limit, f.reserved, f.actual, f.idempotencyKey)
	if err != nil {
		fmt.Fprintf(stderr, "floodgate settle: %s (idempotency key %s)\n", describeError(err), f.idempotencyKey)
		return exitCode(checkExitError)
	}
	row := settleRow{
		IdempotencyKey: f.idempotencyKey, Limit: s.Limit, Remaining: s.Remaining, Debt: s.Debt, Unrecorded: s.Unrecorded,
		RetryAfterMs: s.RetryAfter.Milliseconds(), ResetAfterMs: s.ResetAfter.Milliseconds(), Duplicate: s.Duplicate, Degraded: s.Degraded,
	}
	if f.json {
		return json.NewEncoder(stdout).Encode(row)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IDEMPOTENCY KEY\tREMAINING\tDEBT\tLIMIT\tRETRY AFTER\tRESET AFTER\tNOTE")
	note := ""
	switch {
	case s.Degraded:
		note = "degraded: not known to be charged; retry with this key"
	case s.Duplicate:
		note = "duplicate: already settled, nothing charged"
	case s.Unrecorded > 0:
		note = fmt.Sprintf("%d units not recorded (debt at its bound)", s.Unrecorded)
	}
	fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", row.IdempotencyKey, s.Remaining, s.Debt, s.Limit,
		simulate.ShortDuration(s.RetryAfter), simulate.ShortDuration(s.ResetAfter), note)
	return tw.Flush()
}

// validate checks the settlement's flags; it makes a random idempotency
// key when none is given.
func (f *settleFlags) validate(actualGiven bool) error {
	switch {
	case !actualGiven:
		return fmt.Errorf("--actual is required (the units used, >= 0)")
	case f.actual < 0:
		return fmt.Errorf("--actual must not be negative, got %d", f.actual)
	case f.reserved < 0:
		return fmt.Errorf("--reserved must not be negative, got %d", f.reserved)
	case len(f.idempotencyKey) > 128:
		return fmt.Errorf("--idempotency-key: %d bytes exceed 128", len(f.idempotencyKey))
	}
	if f.idempotencyKey == "" {
		f.idempotencyKey = "cli-" + rand.Text()
	}
	return nil
}
