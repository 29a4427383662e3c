package redisstore_test

import (
	"context"
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
