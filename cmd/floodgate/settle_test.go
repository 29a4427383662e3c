package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/store/memstore"
)

// TestSettleCommand: `floodgate settle` charges the usage above the
// reservation as debt, a rerun with the same --idempotency-key is a
// duplicate, the key reused with another --actual fails (exit 1), and bad
// flags exit 2.
func TestSettleCommand(t *testing.T) {
	addr := startCheckServer(t, memstore.New(memstore.Config{}))
	base := []string{"settle", "--addr", addr, "--key", "tenant:a", "--limit", "1000/1m"}
	args := append(base[:len(base):len(base)], "--reserved", "300", "--actual", "1500", "--idempotency-key", "req-1", "--json")
	var row settleRow
	for i, wantDup := range []bool{false, true} {
		code, out, errOut := runCLI(args, nil)
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &row); err != nil {
			t.Fatalf("run %d: %v: %q", i, err, out)
		}
		// Nothing was reserved on this server: 1200 above an empty
		// reservation on a full bucket of 1000 leaves 200 owed.
		if row.Debt != 200 || row.Remaining != 0 || row.Duplicate != wantDup || row.IdempotencyKey != "req-1" || row.RetryAfterMs != 12060 {
			t.Fatalf("run %d: %+v", i, row)
		}
	}
	if code, _, errOut := runCLI(append(base[:len(base):len(base)], "--reserved", "300", "--actual", "1600", "--idempotency-key", "req-1"), nil); code != 1 || !strings.Contains(errOut, "idempotency_key") {
		t.Fatalf("reused key: exit %d, %q; want 1 naming idempotency_key", code, errOut)
	}
	// Without a key, one is made and shown; a table by default.
	code, out, errOut := runCLI(append(base[:len(base):len(base)], "--actual", "0"), nil)
	if code != 0 || !strings.Contains(out, "cli-") || !strings.Contains(out, "DEBT") {
		t.Fatalf("no key: exit %d, %q %q", code, out, errOut)
	}
	// --actual from the environment counts as given.
	if code, out, errOut := runCLI(append(base[:len(base):len(base)], "--json"), map[string]string{"FLOODGATE_ACTUAL": "0"}); code != 0 || !strings.Contains(out, `"debt":200`) { // actual 0, nothing reserved: charges nothing
		t.Fatalf("FLOODGATE_ACTUAL: exit %d, %q %q", code, out, errOut)
	}
	for _, bad := range [][]string{
		base, // no --actual
		append(base[:len(base):len(base)], "--actual", "1", "--reserved", "-2"), // negative
		{"settle", "--addr", addr, "--limit", "10/1m", "--actual", "1"},         // no --key
	} {
		if code, _, errOut := runCLI(bad, nil); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", bad, code, errOut)
		}
	}
}

// TestSettleCalendarAndLeaky: settle takes the same limit flags as check,
// --time-zone for a calendar quota and a leaky bucket's --algorithm
// included (they were missing from settle's copy of check's flags).
func TestSettleCalendarAndLeaky(t *testing.T) {
	addr := startCheckServer(t, memstore.New(memstore.Config{}))
	for _, tc := range []struct {
		limit []string
		debt  int64
	}{
		{[]string{"--limit", "100/calendar_month", "--time-zone", "Asia/Jakarta"}, 20},
		{[]string{"--limit", "100/1m", "--algorithm", "leaky_bucket", "--burst", "100"}, 20},
	} {
		args := append([]string{"settle", "--addr", addr, "--key", "k" + tc.limit[1], "--actual", "120", "--idempotency-key", "i", "--json"}, tc.limit...)
		code, out, errOut := runCLI(args, nil)
		var row settleRow
		if code != 0 || json.Unmarshal([]byte(out), &row) != nil || row.Debt != tc.debt || row.Limit != 100 {
			t.Errorf("%v: exit %d, %q %q; want debt %d of a limit of 100", tc.limit, code, out, errOut, tc.debt)
		}
	}
}
