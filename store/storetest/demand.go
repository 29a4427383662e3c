package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/store"
)

// RunDemand runs the store.DemandStore conformance suite against the
// stores newDemand returns (one per subtest; keys are unique per subtest,
// so the stores may share a backend).
func RunDemand(t *testing.T, newDemand func(t *testing.T) store.DemandStore) {
	t0 := time.UnixMilli(1_700_000_000_000)
	report := func(t *testing.T, d store.DemandStore, now time.Time, reps ...store.DemandReport) []store.DemandTotal {
		t.Helper()
		out := make([]store.DemandTotal, len(reps))
		if err := d.ReportDemand(context.Background(), now, reps, out); err != nil {
			t.Fatalf("ReportDemand: %v", err)
		}
		return out
	}
	t.Run("sums live reporters", func(t *testing.T) {
		d, k := newDemand(t), uniqueKey(t)
		got := report(t, d, t0,
			store.DemandReport{Key: k, Reporter: "a", MilliRPS: 1000, TTL: time.Second},
			store.DemandReport{Key: k, Reporter: "b", MilliRPS: 3000, TTL: time.Second},
			store.DemandReport{Key: k, Reporter: "a", MilliRPS: 2000, TTL: time.Second}, // replaces a's
		)
		want := []store.DemandTotal{{Reporters: 1, MilliRPS: 1000}, {Reporters: 2, MilliRPS: 4000}, {Reporters: 2, MilliRPS: 5000}}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("total after report %d = %+v, want %+v", i, got[i], want[i])
			}
		}
	})
	t.Run("expired reports drop out", func(t *testing.T) {
		d, k := newDemand(t), uniqueKey(t)
		report(t, d, t0, store.DemandReport{Key: k, Reporter: "a", MilliRPS: 1000, TTL: time.Second})
		report(t, d, t0.Add(500*time.Millisecond), store.DemandReport{Key: k, Reporter: "b", MilliRPS: 7, TTL: 5 * time.Second})
		got := report(t, d, t0.Add(time.Second), store.DemandReport{Key: k, Reporter: "c", MilliRPS: 3, TTL: time.Second})
		if want := (store.DemandTotal{Reporters: 2, MilliRPS: 10}); got[0] != want {
			t.Errorf("after a's TTL: %+v, want %+v", got[0], want)
		}
	})
	t.Run("forget", func(t *testing.T) {
		d, k := newDemand(t), uniqueKey(t)
		report(t, d, t0, store.DemandReport{Key: k, Reporter: "a", MilliRPS: 1000, TTL: time.Minute})
		if err := d.ForgetDemand(context.Background(), k, "a"); err != nil {
			t.Fatalf("ForgetDemand: %v", err)
		}
		if err := d.ForgetDemand(context.Background(), k, "never"); err != nil {
			t.Fatalf("ForgetDemand of an unknown reporter: %v", err)
		}
		got := report(t, d, t0, store.DemandReport{Key: k, Reporter: "b", MilliRPS: 5, TTL: time.Minute})
		if want := (store.DemandTotal{Reporters: 1, MilliRPS: 5}); got[0] != want {
			t.Errorf("after forgetting a: %+v, want %+v", got[0], want)
		}
	})
	t.Run("keys apart", func(t *testing.T) {
		d, k := newDemand(t), uniqueKey(t)
		got := report(t, d, t0,
			store.DemandReport{Key: k + "1", Reporter: "a", MilliRPS: 1, TTL: time.Minute},
			store.DemandReport{Key: k + "2", Reporter: "a", MilliRPS: 2, TTL: time.Minute},
		)
		if got[1] != (store.DemandTotal{Reporters: 1, MilliRPS: 2}) {
			t.Errorf("second key: %+v", got[1])
		}
	})
	t.Run("invalid", func(t *testing.T) {
		d := newDemand(t)
		err := d.ReportDemand(context.Background(), t0, []store.DemandReport{{Key: uniqueKey(t), Reporter: "a", TTL: 0}}, make([]store.DemandTotal, 1))
		if err == nil {
			t.Error("a zero TTL was accepted")
		}
		if err := d.ReportDemand(context.Background(), t0, make([]store.DemandReport, 1), nil); err == nil {
			t.Error("mismatched lengths were accepted")
		}
	})
}

// uniqueKey is a key no other test uses (no braces: Redis hash tags).
func uniqueKey(t *testing.T) string {
	p := uniquePrefix(t)
	b := []byte(p)
	for i, c := range b {
		if c == '{' || c == '}' {
			b[i] = '_'
		}
	}
	return string(b)
}
