package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestSettleMetrics: every settlement is counted by its result, and the
// units a debt at its bound could not record are counted too.
func TestSettleMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	h := start(t, nil, server.Settings{Metrics: m})
	ctx := context.Background()
	fw := floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW
	settle := func(id string, reserved, actual int64) {
		t.Helper()
		if _, err := h.client.Settle(ctx, &floodgatev1.SettleRequest{Key: "t", Algorithm: fw, Reserved: reserved, Actual: actual, IdempotencyKey: id, Source: settleLimit(10, time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	settle("a", 0, 25) // 20 recorded (twice the limit at most), 5 not
	settle("a", 0, 25) // a retry
	settle("b", 5, 2)
	settle("c", 3, 3)
	if _, err := h.client.Settle(ctx, &floodgatev1.SettleRequest{Key: "t", Algorithm: fw, Actual: 1, IdempotencyKey: "a", Source: settleLimit(10, time.Minute)}); err == nil {
		t.Fatal("a reused idempotency key was accepted")
	}
	down := start(t, downSettler{memstore.New(memstore.Config{})}, server.Settings{Metrics: m})
	if _, err := down.client.Settle(ctx, &floodgatev1.SettleRequest{Key: "t", Algorithm: fw, Actual: 1, IdempotencyKey: "d", Source: settleLimit(10, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	unrecorded := 0.0
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range mt.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetName() {
			case "floodgate_settlements_total":
				got[labels["result"]] += mt.GetCounter().GetValue()
			case "floodgate_settle_unrecorded_units_total":
				unrecorded += mt.GetCounter().GetValue()
			default:
				continue
			}
			if labels["api"] != observability.APICheck || labels["algorithm"] != "fixed_window" {
				t.Errorf("%s: labels %v", mf.GetName(), labels)
			}
		}
	}
	want := map[string]float64{
		observability.SettleDebt: 1, observability.SettleDuplicate: 1, observability.SettleRefund: 1,
		observability.SettleEven: 1, observability.SettleConflict: 1, observability.SettleDegraded: 1,
	}
	for result, n := range want {
		if got[result] != n {
			t.Errorf("settlements{result=%q} = %v, want %v", result, got[result], n)
		}
	}
	if len(got) != len(want) || unrecorded != 5 {
		t.Errorf("settlements %v, unrecorded units %v; want %v and 5", got, unrecorded, want)
	}
}
