package redisstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
	"github.com/floodgate/floodgate/store/storetest"
)

func TestDemandConformance(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	// A timeout far above the default: on a loaded machine the first call's
	// library load must not turn a conformance check into a timeout.
	const timeout = 5 * time.Second
	storetest.RunDemand(t, func(t *testing.T) store.DemandStore {
		d, err := redisstore.NewDemand(c, "", timeout)
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
	// The library is loaded again when Redis lost it (FUNCTION FLUSH), and
	// the budget's hash expires with its last report.
	if err := c.FunctionFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	d, _ := redisstore.NewDemand(c, "t:", timeout)
	out := make([]store.DemandTotal, 1)
	err := d.ReportDemand(context.Background(), time.Now(), []store.DemandReport{{Key: "k", Reporter: "a", MilliRPS: 9, TTL: 3 * time.Second}}, out)
	if err != nil || out[0] != (store.DemandTotal{Reporters: 1, MilliRPS: 9}) {
		t.Fatalf("after FUNCTION FLUSH: %+v, %v", out[0], err)
	}
	ttl, err := c.PTTL(context.Background(), "t:qd:{k}").Result()
	if err != nil || ttl <= 0 || ttl > 3*time.Second {
		t.Errorf("PTTL = %v, %v; want within the report's 3s", ttl, err)
	}
	if _, err := redisstore.NewDemand(c, "a{b", 0); err == nil {
		t.Error("a prefix with a brace was accepted")
	}
	if err := d.ForgetDemand(context.Background(), "k{", "a"); err == nil {
		t.Error("a key with a brace was accepted")
	}
}

// TestDemandRescan: once a report expires, the next report rescans the
// budget: it drops the expired reports and those that do not parse, and
// counts a reporter's report once however often it reported.
func TestDemandRescan(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	d, err := redisstore.NewDemand(c, "t:", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_780_000_000_000)
	report := func(at time.Time, reporter string, milliRPS int64, ttl time.Duration) store.DemandTotal {
		t.Helper()
		out := make([]store.DemandTotal, 1)
		if err := d.ReportDemand(ctx, at, []store.DemandReport{{Key: "k", Reporter: reporter, MilliRPS: milliRPS, TTL: ttl}}, out); err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	report(now, "a", 100, time.Second)
	report(now, "b", 20, time.Minute)
	if got := report(now, "b", 30, time.Minute); got != (store.DemandTotal{Reporters: 2, MilliRPS: 130}) {
		t.Fatalf("a and b (b twice): %+v, want 2 reporters, 130", got)
	}
	for _, v := range []string{"x:1", "5", "5:", ":9999999999999", "1:2:3"} {
		if err := c.HSet(ctx, "t:qd:{k}", "r:bad "+v, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// a has expired: the rescan counts b and c, and deletes a and the bad fields.
	if got := report(now.Add(2*time.Second), "c", 4, time.Minute); got != (store.DemandTotal{Reporters: 2, MilliRPS: 34}) {
		t.Fatalf("after a expired: %+v, want 2 reporters, 34", got)
	}
	fields, err := c.HKeys(ctx, "t:qd:{k}").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(fields)
	if want := []string{"#max", "#min", "#n", "#sum", "r:b", "r:c"}; !slices.Equal(fields, want) {
		t.Fatalf("fields %q, want %q", fields, want)
	}
}
