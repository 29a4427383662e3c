package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestSettleRefundGivesRoomBack: a check reserved the whole limit, the
// usage came out lower; the settlement's refund is written, so the key
// has exactly the difference back. (Not the leaky bucket, whose give-back
// frees no slot: the starts already queued stay where they are.)
func TestSettleRefundGivesRoomBack(t *testing.T) {
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		if alg == algorithms.LeakyBucket {
			continue
		}
		t.Run(alg.String(), func(t *testing.T) {
			s := memstore.New(memstore.Config{SweepInterval: -1})
			defer s.Close()
			l := algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Hour}
			now := time.Unix(1_700_000_000, 0).Truncate(time.Hour)
			out := make([]algorithms.Decision, 1)
			if err := s.Decide(ctx, now, []store.Request{{Key: "k", Limit: l, Cost: 10}}, out); err != nil || !out[0].Allowed {
				t.Fatalf("reserve 10: %+v %v", out[0], err)
			}
			r, err := s.Settle(ctx, now, store.Settlement{Key: "k", Limit: l, Reserved: 10, Actual: 4, IdempotencyKey: "call-1"})
			if err != nil || r.Decision.Remaining != 6 {
				t.Fatalf("settle 4 of 10: %+v %v, want 6 remaining", r, err)
			}
			if err := s.Decide(ctx, now, []store.Request{{Key: "k", Limit: l, Cost: 7, DryRun: true}}, out); err != nil || out[0].Allowed {
				t.Fatalf("7 after the refund: %+v %v, want denied (6 back)", out[0], err)
			}
			if err := s.Decide(ctx, now, []store.Request{{Key: "k", Limit: l, Cost: 6}}, out); err != nil || !out[0].Allowed || out[0].Remaining != 0 {
				t.Fatalf("6 after the refund: %+v %v, want allowed with 0 remaining", out[0], err)
			}
		})
	}
}

// TestSettleRecordsCappedByCount is TestSettleRecordsAreCapped with short
// idempotency keys, so that the key cap binds long before the byte cap,
// on 256 tenants, so that every shard fills: records, counted apart from
// states, never number more than MaxKeys.
func TestSettleRecordsCappedByCount(t *testing.T) {
	const maxKeys = 1000
	s := memstore.New(memstore.Config{MaxKeys: maxKeys, MaxBytes: memstore.MinMaxBytes, SweepInterval: -1})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Second}
	now := time.Unix(1_700_000_000, 0)
	for i := range 20_000 {
		set := store.Settlement{Key: fmt.Sprint("tenant-", i%256), Limit: l, Actual: 1, IdempotencyKey: fmt.Sprint(i)}
		if _, err := s.Settle(context.Background(), now, set); err != nil {
			t.Fatalf("settle %d: %v", i, err)
		}
		if s.Len() > maxKeys+256 { // the 256 tenants' states and the records
			t.Fatalf("after %d settles: %d entries, cap %d (%d of %d bytes)", i+1, s.Len(), maxKeys, s.Bytes(), s.MaxBytes())
		}
	}
	if s.Bytes() > s.MaxBytes()/2 {
		t.Fatalf("%d of %d bytes: the byte cap, not the key cap, was tested", s.Bytes(), s.MaxBytes())
	}
}
