package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/storetest"
)

func TestDemandConformance(t *testing.T) {
	storetest.RunDemand(t, func(*testing.T) store.DemandStore { return memstore.NewDemand() })
}

// TestDemandSweep: keys whose reporters all expired are dropped without
// being reported again, so memory follows the live reporters.
func TestDemandSweep(t *testing.T) {
	d := memstore.NewDemand()
	t0 := time.Unix(1_700_000_000, 0)
	out := make([]store.DemandTotal, 1)
	for i := range 10 {
		rep := []store.DemandReport{{Key: string(rune('a' + i)), Reporter: "r", MilliRPS: 1, TTL: time.Second}}
		if err := d.ReportDemand(context.Background(), t0, rep, out); err != nil {
			t.Fatal(err)
		}
	}
	later := t0.Add(2 * time.Second)
	for range 4096 {
		rep := []store.DemandReport{{Key: "live", Reporter: "r", MilliRPS: 1, TTL: time.Second}}
		if err := d.ReportDemand(context.Background(), later, rep, out); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.Len(); got != 1 {
		t.Errorf("keys after the sweep = %d, want 1", got)
	}
}
