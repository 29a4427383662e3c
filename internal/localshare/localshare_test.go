package localshare

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

func TestScale(t *testing.T) {
	tb := func(r, b int64) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: r, Period: time.Minute, Burst: b}
	}
	fw := func(r int64) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: r, Period: time.Minute}
	}
	for _, tc := range []struct {
		name     string
		in       algorithms.Limit
		replicas int
		want     algorithms.Limit
	}{
		{"one replica keeps the limit", fw(30), 1, fw(30)},
		{"no count keeps the limit", fw(30), 0, fw(30)},
		{"a third", fw(30), 3, fw(10)},
		{"rounded down", fw(31), 3, fw(10)},
		{"at least one", fw(2), 3, fw(1)},
		{"burst divided too", tb(30, 90), 3, tb(10, 30)},
		{"burst unset stays unset", tb(30, 0), 3, tb(10, 0)},
		{"burst at least one", tb(30, 2), 3, tb(10, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Scale(tc.in, tc.replicas); got != tc.want {
				t.Errorf("Scale(%+v, %d) = %+v, want %+v", tc.in, tc.replicas, got, tc.want)
			}
		})
	}
}

// TestScaleBound: whatever the limit and the count, the shares sum to at
// most the limit when the limit is at least the count, and every share
// admits something.
func TestScaleBound(t *testing.T) {
	for requests := int64(1); requests <= 200; requests++ {
		for n := 1; n <= 16; n++ {
			s := Scale(algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: requests, Period: time.Second}, n)
			if s.Requests < 1 {
				t.Fatalf("%d/%d: share %d", requests, n, s.Requests)
			}
			if requests >= int64(n) && s.Requests*int64(n) > requests {
				t.Fatalf("%d requests over %d replicas: shares sum to %d", requests, n, s.Requests*int64(n))
			}
		}
	}
}

// admitted spends one unit at a time on key until denied and returns how
// many were admitted.
func admitted(t *testing.T, s *Share, now time.Time, key string, l algorithms.Limit) int {
	t.Helper()
	for n := 0; n < 1000; n++ {
		out := make([]algorithms.Decision, 1)
		if err := s.Decide(context.Background(), now, []store.Request{{Key: key, Limit: l, Cost: 1}}, out); err != nil {
			t.Fatal(err)
		}
		if !out[0].Allowed {
			return n
		}
	}
	t.Fatal("never denied")
	return 0
}

func TestShareDecidesAThird(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	count := 3
	s := New(func() int { return count }, memstore.Config{})
	for _, alg := range algorithms.All() {
		l := algorithms.Limit{Algorithm: alg, Requests: 30, Period: time.Minute}
		if got := admitted(t, s, now, "k", l); got != 10 {
			t.Errorf("%v: admitted %d of 30 with 3 replicas, want 10", alg, got)
		}
	}
	out := make([]algorithms.Decision, 1)
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 30, Period: time.Minute}
	if err := s.Decide(context.Background(), now, []store.Request{{Key: "other", Limit: l, Cost: 1}}, out); err != nil || out[0].Limit != 10 {
		t.Errorf("decision %+v, %v; want the share's capacity 10 as its limit", out[0], err)
	}

	// The circuit's changes keep the counts; Discard forgets them.
	if s.mem.Load() == nil {
		t.Fatal("not active after local decisions")
	}
	s.StoreChanged(true, errors.New("down")) // an opening circuit keeps the counts
	if got := admitted(t, s, now, "k", l); got != 0 {
		t.Errorf("admitted %d after the circuit opened again, want 0 (counts kept)", got)
	}
	s.StoreChanged(false, nil) // a closing one too, until they expire
	if s.mem.Load() == nil {
		t.Fatal("counts dropped when the store came back")
	}
	count = 2
	if got := admitted(t, s, now, "k", l); got != 5 {
		t.Errorf("admitted %d with 2 replicas after 10 of a share of 15, want 5", got)
	}
	s.Discard()
	if s.mem.Load() != nil {
		t.Fatal("active after Discard")
	}
	if got := admitted(t, s, now, "k", l); got != 15 {
		t.Errorf("admitted %d after Discard with 2 replicas, want 15", got)
	}
}

// TestShareFreedWhenEmpty: when the store comes back and every local
// count has expired, the memory is freed; with counts left it is kept.
func TestShareFreedWhenEmpty(t *testing.T) {
	now := time.Unix(1_700_000_040, 0)
	s := New(nil, memstore.Config{})
	defer s.Discard()
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 3, Period: time.Second}
	out := make([]algorithms.Decision, 1)
	if err := s.Decide(context.Background(), now, []store.Request{{Key: "k", Limit: l, Cost: 1}}, out); err != nil {
		t.Fatal(err)
	}
	s.StoreChanged(false, nil)
	if s.mem.Load() == nil {
		t.Fatal("a live count was dropped")
	}
	// A look after the window's end finds the count expired and removes it.
	if err := s.Decide(context.Background(), now.Add(2*time.Second), []store.Request{{Key: "k", Limit: l}}, out); err != nil {
		t.Fatal(err)
	}
	s.StoreChanged(true, errors.New("down"))
	if s.mem.Load() == nil {
		t.Fatal("an opening circuit freed the memory")
	}
	s.StoreChanged(false, nil)
	if s.mem.Load() != nil {
		t.Fatal("the memory was kept with no count left")
	}
}

func TestShareNilCountIsWholeLimit(t *testing.T) {
	s := New(nil, memstore.Config{})
	defer s.Discard()
	if s.Replicas() != 1 {
		t.Fatalf("Replicas() = %d, want 1", s.Replicas())
	}
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 7, Period: time.Second}
	if got := admitted(t, s, time.Unix(1_700_000_000, 0), "k", l); got != 7 {
		t.Errorf("admitted %d, want 7", got)
	}
}

func TestShareCountBelowOne(t *testing.T) {
	s := New(func() int { return -4 }, memstore.Config{})
	defer s.Discard()
	if s.Replicas() != 1 {
		t.Fatalf("Replicas() = %d, want 1", s.Replicas())
	}
}

// TestShareConcurrentDiscard: decisions racing Discard either decide or
// fail with store.ErrUnavailable (their store was discarded under them);
// none panics, and the share stays usable.
func TestShareConcurrentDiscard(t *testing.T) {
	s := New(func() int { return 3 }, memstore.Config{Shards: 4})
	defer s.Discard()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 300, Period: time.Second}
	done := make(chan struct{})
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				out := make([]algorithms.Decision, 1)
				err := s.Decide(context.Background(), time.Unix(1_700_000_000, 0), []store.Request{{Key: string(rune('a' + w)), Limit: l, Cost: 1}}, out)
				if err != nil && !errors.Is(err, store.ErrUnavailable) {
					errs <- err
					return
				}
			}
		}()
	}
	for range 100 {
		s.Discard()
		time.Sleep(50 * time.Microsecond)
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := admitted(t, s, time.Unix(1_700_000_000, 0), "fresh", l); got != 100 {
		t.Errorf("admitted %d after the race, want 100", got)
	}
}

// TestShareOutagesShareOnePeriod: a flapping store (the circuit opens and
// closes again and again within one period) grants no fresh share per
// outage: the local counts outlive the circuit's closing, until their
// period ends. 9 a minute on 2 replicas is a share of 4, over however many
// outages; the next minute admits 4 again.
func TestShareOutagesShareOnePeriod(t *testing.T) {
	now := time.Unix(1_700_000_040, 0) // a whole minute
	s := New(func() int { return 2 }, memstore.Config{})
	defer s.Discard()
	for _, alg := range algorithms.All() {
		l := algorithms.Limit{Algorithm: alg, Requests: 9, Period: time.Minute}
		key := "k-" + alg.String()
		total := 0
		for outage := range 9 {
			s.StoreChanged(true, errors.New("down"))
			total += admitted(t, s, now.Add(time.Duration(outage)*time.Second), key, l)
			s.StoreChanged(false, nil)
		}
		if total != 4 {
			t.Errorf("%v: %d admitted over 9 outages in one minute, want the share, 4", alg, total)
		}
		if got := admitted(t, s, now.Add(2*time.Minute), key, l); got != 4 {
			t.Errorf("%v: %d admitted two minutes on, want a new period's share, 4", alg, got)
		}
	}
}

// TestOverShareWait: two replicas, a cost of 6 on limits of 10 (a share of
// 5) fits the limit and never the share. The deny says when the limit's
// period ends, in whole seconds, never a negative wait; a cost that fits
// is admitted.
func TestOverShareWait(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 20, 300e6, time.UTC) // 20.3 s into a minute
	jakarta, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		limit algorithms.Limit
		want  time.Duration
	}{
		{"token bucket: the period's end", algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}, 40 * time.Second},
		{"fixed window: the window's end", algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Minute}, 40 * time.Second},
		{"sliding window of an hour", algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: time.Hour}, time.Hour - 20*time.Second},
		{"leaky bucket", algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: time.Second, Burst: 10}, time.Second},
		{"calendar day in Jakarta (UTC+7)", algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Calendar: algorithms.Day, Location: jakarta}, 17*time.Hour - 20*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(func() int { return 2 }, memstore.Config{})
			defer s.Discard()
			out := make([]algorithms.Decision, 1)
			if err := s.Decide(context.Background(), t0, []store.Request{{Key: "k", Limit: tc.limit, Cost: 6}}, out); err != nil {
				t.Fatal(err)
			}
			if out[0].Allowed || out[0].RetryAfter != tc.want {
				t.Errorf("cost 6 of a share of 5: allowed %v, retry_after %v; want denied, %v", out[0].Allowed, out[0].RetryAfter, tc.want)
			}
			if err := s.Decide(context.Background(), t0, []store.Request{{Key: "k", Limit: tc.limit, Cost: 5}}, out); err != nil || !out[0].Allowed {
				t.Errorf("cost 5 of a share of 5: %+v %v, want allowed", out[0], err)
			}
		})
	}
}
