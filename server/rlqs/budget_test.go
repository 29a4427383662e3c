package rlqs

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/redisstore"
)

// TestSharesWithinBudget: under steady demand, once every instance has
// reported on the same totals, the shares in force add up to at most the
// budget, on one replica and on two sharing a demand store over Redis. A
// share that would shrink is sent, however little: keeping the last,
// higher one (it was within 5%) while another instance's grew past 5%
// summed to 614 of 600.
func TestSharesWithinBudget(t *testing.T) {
	newDemand := map[string]func(t *testing.T) store.DemandStore{
		"one replica": func(*testing.T) store.DemandStore { return memstore.NewDemand() },
		"two replicas over Redis": func(t *testing.T) store.DemandStore {
			redistest.Require(t)
			d, err := redisstore.NewDemand(redistest.StartServer(t).Client(), "", 0)
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
	}
	for name, mk := range newDemand {
		t.Run(name, func(t *testing.T) {
			demand := mk(t)
			clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
			cfg := testkit.StaticRules(testkit.ParseRules(t, "domain: d\nquota_buckets:\n  - bucket_id: {k: \"*\"}\n    rate_limit: {unit: minute, requests_per_unit: 600}\n"))
			svcA := New(Settings{Rules: cfg, Demand: demand, Now: clock.Now})
			svcB := svcA
			if name != "one replica" {
				svcB = New(Settings{Rules: cfg, Demand: demand, Now: clock.Now})
			}
			a, b := openFake(t, svcA), openFake(t, svcB)
			id := map[string]string{"k": "x"}
			const every = 30 * time.Second
			var shareA, shareB uint64
			// 5.6 and 4.4 requests a second, then 5.33 and 4.67 for good.
			a.in <- report("d", id, 168, every)
			shareA = perMinute(t, only(t, a.next(t)))
			b.in <- report("d", id, 132, every)
			shareB = perMinute(t, only(t, b.next(t)))
			if svcA == svcB {
				shareA = perMinute(t, only(t, a.next(t))) // pushed: a second reporter
			}
			for round := 2; round <= 6; round++ {
				clock.Advance(every)
				a.in <- report("", id, 160, every)
				shareA = perMinute(t, only(t, a.next(t)))
				b.in <- report("", id, 140, every)
				shareB = perMinute(t, only(t, b.next(t)))
				if round >= 3 && shareA+shareB > 600 {
					t.Errorf("round %d: shares %d + %d = %d, more than the budget of 600", round, shareA, shareB, shareA+shareB)
				}
			}
			if shareA+shareB < 590 {
				t.Errorf("shares %d + %d: the budget is not used", shareA, shareB)
			}
		})
	}
}

// TestSettingsSharesShapeTheShare: the service splits a budget with the
// ShareParams of its Settings, zero fields taking the defaults. One
// reporter at 1/3 of a request a second, of a budget of 600 a minute:
// the default floor (10%) and cap (2 × its demand, 40 a minute) give it
// the floor, 60; a floor of half the budget gives it 300.
func TestSettingsSharesShapeTheShare(t *testing.T) {
	for _, tc := range []struct {
		shares ShareParams
		want   uint64
	}{
		{ShareParams{}, 60},
		{ShareParams{Floor: 0.5, Cap: 1}, 300},
	} {
		clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
		cfg := testkit.StaticRules(testkit.ParseRules(t, "domain: d\nquota_buckets:\n  - bucket_id: {k: \"*\"}\n    rate_limit: {unit: minute, requests_per_unit: 600}\n"))
		svc := New(Settings{Rules: cfg, Demand: memstore.NewDemand(), Now: clock.Now, Shares: tc.shares})
		a := openFake(t, svc)
		a.in <- report("d", map[string]string{"k": "x"}, 10, 30*time.Second)
		if got := perMinute(t, only(t, a.next(t))); got != tc.want {
			t.Errorf("Shares %+v: a share of %d a minute, want %d", tc.shares, got, tc.want)
		}
	}
}
