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

// TestSettleRecordsAreCapped: a hostile caller sending a million distinct
// idempotency keys cannot grow the store past its key and byte caps: the
// records have their own share of them and evict only each other.
func TestSettleRecordsAreCapped(t *testing.T) {
	const maxKeys = 1000
	s := memstore.New(memstore.Config{MaxKeys: maxKeys, MaxBytes: memstore.MinMaxBytes, SweepInterval: -1})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Second}
	now := time.Unix(1_700_000_000, 0)
	long := string(make([]byte, store.MaxIdempotencyKeyLen-10))
	for i := range 50_000 {
		set := store.Settlement{Key: "tenant", Limit: l, Actual: 1, IdempotencyKey: fmt.Sprintf("%s%d", long, i)}
		if _, err := s.Settle(context.Background(), now, set); err != nil {
			t.Fatalf("settle %d: %v", i, err)
		}
		if s.Len() > maxKeys+1 || s.Bytes() > 2*s.MaxBytes() { // the records and one state
			t.Fatalf("after %d settles: %d entries (cap %d), %d bytes (cap %d)", i+1, s.Len(), maxKeys, s.Bytes(), s.MaxBytes())
		}
	}
}

// TestSettleRecordExpires: past the settle window the idempotency key is
// forgotten and charges again; within it, a retry is a duplicate.
func TestSettleRecordExpires(t *testing.T) {
	s := memstore.New(memstore.Config{SettleWindow: time.Minute, SweepInterval: -1})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 100, Period: time.Hour}
	set := store.Settlement{Key: "k", Limit: l, Actual: 5, IdempotencyKey: "once"}
	now := time.Unix(1_700_000_000, 0).Truncate(time.Hour)
	for _, c := range []struct {
		at      time.Duration
		dup     bool
		remains int64
	}{{0, false, 95}, {59 * time.Second, true, 95}, {time.Minute, false, 90}} {
		r, err := s.Settle(context.Background(), now.Add(c.at), set)
		if err != nil || r.Duplicate != c.dup || r.Decision.Remaining != c.remains {
			t.Fatalf("at +%v: %+v, %v; want duplicate %v, remaining %d", c.at, r, err, c.dup, c.remains)
		}
	}
}
