package splitstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/splitstore"
	"github.com/floodgate/floodgate/store/storetest"
)

// TestConformance: two embedded stores behind the split pass the store
// contract, all or nothing included.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return splitstore.New(memstore.New(memstore.Config{}), memstore.New(memstore.Config{}))
	})
}

var (
	perSec = algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Period: time.Second}
	perMin = algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Period: time.Minute}
)

// left is what key has left under l on st (a look); each limit has a
// scope of its own, so that one store's counts of two limits on a key
// stay apart.
func left(t *testing.T, st store.Store, key string, l algorithms.Limit) int64 {
	t.Helper()
	out := make([]algorithms.Decision, 1)
	if err := st.Decide(context.Background(), testkit.T0, []store.Request{{Key: key, Scope: l.Period.String(), Limit: l, Cost: 0}}, out); err != nil {
		t.Fatal(err)
	}
	return out[0].Remaining
}

// TestRouting: per-second limits are counted on the per-second store,
// the others on the main one, and a denied call charges neither.
func TestRouting(t *testing.T) {
	main, sec := memstore.New(memstore.Config{}), memstore.New(memstore.Config{})
	s := splitstore.New(main, sec)
	defer s.Close()
	call := func(secCost, minCost int64) []algorithms.Decision {
		out := make([]algorithms.Decision, 2)
		err := s.Decide(context.Background(), testkit.T0, []store.Request{{Key: "k", Scope: "1s", Limit: perSec, Cost: secCost}, {Key: "k", Scope: "1m0s", Limit: perMin, Cost: minCost}}, out)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if d := call(1, 1); !d[0].Allowed || !d[1].Allowed {
		t.Fatalf("first call: %+v", d)
	}
	if left(t, sec, "k", perSec) != 1 || left(t, main, "k", perMin) != 1 {
		t.Fatalf("per-second left %d on the per-second store, per-minute left %d on the main one; want 1 and 1",
			left(t, sec, "k", perSec), left(t, main, "k", perMin))
	}
	if left(t, main, "k", perSec) != 2 || left(t, sec, "k", perMin) != 2 {
		t.Fatal("a store counted the other's limit")
	}
	// Denied by the main store: the per-second store is not charged.
	if d := call(1, 2); d[1].Allowed {
		t.Fatalf("2 more per minute allowed: %+v", d)
	}
	if got := left(t, sec, "k", perSec); got != 1 {
		t.Errorf("denied by the main store, the per-second store has %d left, want 1", got)
	}
	// Denied by the per-second store: the main store is not charged.
	if d := call(2, 1); d[0].Allowed {
		t.Fatalf("2 more per second allowed: %+v", d)
	}
	if got := left(t, main, "k", perMin); got != 1 {
		t.Errorf("denied by the per-second store, the main store has %d left, want 1", got)
	}
	// Shorter and longer periods than a second stay on the main store.
	for _, p := range []time.Duration{500 * time.Millisecond, 2 * time.Second} {
		l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Period: p}
		if err := s.Decide(context.Background(), testkit.T0, []store.Request{{Key: "p", Scope: p.String(), Limit: l, Cost: 1}}, make([]algorithms.Decision, 1)); err != nil {
			t.Fatal(err)
		}
		if left(t, main, "p", l) != 1 || left(t, sec, "p", l) != 2 {
			t.Errorf("a limit of %v was not counted on the main store", p)
		}
	}
	// One side only: that store alone.
	out := make([]algorithms.Decision, 1)
	if err := s.Decide(context.Background(), testkit.T0, []store.Request{{Key: "only", Scope: "1s", Limit: perSec, Cost: 1}}, out); err != nil || !out[0].Allowed {
		t.Fatalf("per-second only: %v %+v", err, out)
	}
	if left(t, sec, "only", perSec) != 1 || left(t, main, "only", perSec) != 2 {
		t.Error("a per-second-only call was not counted on the per-second store alone")
	}
}

// racer is a main store whose charge, after its look, finds another call
// took the room: it is charged first by someone else.
type racer struct {
	store.Store
	once sync.Once
	take store.Request
}

func (r *racer) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	if len(reqs) > 0 && !reqs[0].DryRun {
		r.once.Do(func() {
			_ = r.Store.Decide(ctx, now, []store.Request{r.take}, make([]algorithms.Decision, 1))
		})
	}
	return r.Store.Decide(ctx, now, reqs, out)
}

// TestGiveBack: when the main store denies on its charge after its look
// allowed (a race), the per-second charge is given back: a fixed window,
// a sliding window, a token bucket and the log count as before; a leaky
// bucket's slot stays taken (its give-back frees nothing).
func TestGiveBack(t *testing.T) {
	for _, tc := range []struct {
		alg  algorithms.Algorithm
		want int64 // left on the per-second store after the raced call
	}{
		{algorithms.FixedWindow, 2},
		{algorithms.SlidingWindow, 2},
		{algorithms.TokenBucket, 2},
		{algorithms.SlidingWindowLog, 2},
		{algorithms.LeakyBucket, 1},
	} {
		t.Run(tc.alg.String(), func(t *testing.T) {
			l := perSec
			l.Algorithm = tc.alg
			sec := memstore.New(memstore.Config{})
			main := &racer{Store: memstore.New(memstore.Config{}), take: store.Request{Key: "k", Scope: "1m0s", Limit: perMin, Cost: 2}}
			s := splitstore.New(main, sec)
			defer s.Close()
			out := make([]algorithms.Decision, 2)
			if err := s.Decide(context.Background(), testkit.T0, []store.Request{{Key: "k", Scope: "1s", Limit: l, Cost: 1, Mode: algorithms.NoWait}, {Key: "k", Scope: "1m0s", Limit: perMin, Cost: 1}}, out); err != nil {
				t.Fatal(err)
			}
			if out[1].Allowed {
				t.Fatalf("the raced main store allowed: %+v", out)
			}
			if got := left(t, sec, "k", l); got != tc.want {
				t.Errorf("after the give-back the per-second store has %d left, want %d", got, tc.want)
			}
		})
	}
}

// failing is a store that cannot decide.
type failing struct{ store.Store }

var errDown = errors.New("down")

func (failing) Decide(context.Context, time.Time, []store.Request, []algorithms.Decision) error {
	return errDown
}

func (failing) Ping(context.Context) error { return errDown }

// TestErrors: a store that cannot decide makes the call an error (the
// failure modes answer it), and a per-second charge made before the main
// store failed is given back.
func TestErrors(t *testing.T) {
	sec := memstore.New(memstore.Config{})
	s := splitstore.New(&failAfterLook{Store: memstore.New(memstore.Config{})}, sec)
	defer s.Close()
	out := make([]algorithms.Decision, 2)
	err := s.Decide(context.Background(), testkit.T0, []store.Request{{Key: "k", Scope: "1s", Limit: perSec, Cost: 1}, {Key: "k", Scope: "1m0s", Limit: perMin, Cost: 1}}, out)
	if !errors.Is(err, errDown) {
		t.Fatalf("error %v, want the main store's", err)
	}
	if got := left(t, sec, "k", perSec); got != 2 {
		t.Errorf("the main store failed on its charge: the per-second store has %d left, want 2 (given back)", got)
	}
	for _, tc := range []struct {
		name      string
		main, sec store.Store
	}{
		{"main down", failing{}, memstore.New(memstore.Config{})},
		{"per-second down", memstore.New(memstore.Config{}), failing{}},
	} {
		s := splitstore.New(tc.main, tc.sec)
		for _, reqs := range [][]store.Request{
			{{Key: "k", Limit: perSec, Cost: 1}, {Key: "k", Limit: perMin, Cost: 1}},
			{{Key: "k", Limit: perSec, Cost: 1}},
			{{Key: "k", Limit: perMin, Cost: 1}},
		} {
			err := s.Decide(context.Background(), testkit.T0, reqs, make([]algorithms.Decision, len(reqs)))
			wantErr := tc.name == "main down" && reqs[len(reqs)-1].Limit == perMin || tc.name == "per-second down" && reqs[0].Limit == perSec
			if wantErr != errors.Is(err, errDown) {
				t.Errorf("%s, %d requests: %v", tc.name, len(reqs), err)
			}
		}
		if !errors.Is(s.Ping(context.Background()), errDown) {
			t.Errorf("%s: Ping says both are up", tc.name)
		}
	}
	both := []store.Request{{Key: "k", Limit: perSec, Cost: 1}, {Key: "k", Limit: perMin, Cost: 1}}
	for _, n := range []int{0, 1, 3} {
		if err := s.Decide(context.Background(), testkit.T0, both, make([]algorithms.Decision, n)); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%d decisions for 2 requests: %v", n, err)
		}
	}
	// A bad limit makes the call invalid, not the failure of its side.
	bad := []store.Request{{Key: "k", Limit: perSec, Cost: 1}, {Key: "k", Limit: algorithms.Limit{Algorithm: perMin.Algorithm, Period: time.Minute}, Cost: 1}}
	if err := s.Decide(context.Background(), testkit.T0, bad, make([]algorithms.Decision, 2)); !errors.Is(err, store.ErrInvalid) || errors.As(err, new(*store.PartialError)) {
		t.Errorf("a limit of 0 requests: %v, want ErrInvalid for the whole call", err)
	}
}

// failAfterLook looks like a store but fails every charge.
type failAfterLook struct{ store.Store }

func (f *failAfterLook) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	if len(reqs) > 0 && !reqs[0].DryRun {
		return errDown
	}
	return f.Store.Decide(ctx, now, reqs, out)
}

// TestSettleAndReset: a settlement goes to its limit's store; Reset
// forgets a key on both.
func TestSettleAndReset(t *testing.T) {
	main, sec := memstore.New(memstore.Config{}), memstore.New(memstore.Config{})
	s := splitstore.New(main, sec)
	defer s.Close()
	if _, err := s.Settle(context.Background(), testkit.T0, store.Settlement{Key: "k", Scope: "1s", Limit: perSec, Actual: 2, IdempotencyKey: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(context.Background(), testkit.T0, store.Settlement{Key: "k", Scope: "1m0s", Limit: perMin, Actual: 1, IdempotencyKey: "b"}); err != nil {
		t.Fatal(err)
	}
	if left(t, sec, "k", perSec) != 0 || left(t, main, "k", perMin) != 1 || left(t, main, "k", perSec) != 2 {
		t.Fatal("settlements did not land on their limits' stores")
	}
	if err := s.Reset(context.Background(), algorithms.Unspecified, "k"); err != nil {
		t.Fatal(err)
	}
	if left(t, sec, "k", perSec) != 2 || left(t, main, "k", perMin) != 2 {
		t.Error("Reset did not forget the key on both stores")
	}
	if _, err := splitstore.New(failing{}, failing{}).Settle(context.Background(), testkit.T0, store.Settlement{Key: "k", Limit: perMin, Actual: 1, IdempotencyKey: "c"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("settle on a store that cannot: %v", err)
	}
}

// refundFails is a store whose refunds fail.
type refundFails struct{ store.Store }

func (r refundFails) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	if len(reqs) > 0 && reqs[0].Cost < 0 {
		return errDown
	}
	return r.Store.Decide(ctx, now, reqs, out)
}

// TestGiveBackDetails: the give-back refunds only what was charged (a
// per-second dry run in the call is not refunded), and a give-back that
// fails leaves the charge but still answers the call's decisions.
func TestGiveBackDetails(t *testing.T) {
	sec := memstore.New(memstore.Config{})
	main := &racer{Store: memstore.New(memstore.Config{}), take: store.Request{Key: "k", Scope: "1m0s", Limit: perMin, Cost: 2}}
	s := splitstore.New(main, sec)
	defer s.Close()
	// The peeked key has one counted.
	if err := sec.Decide(context.Background(), testkit.T0, []store.Request{{Key: "peeked", Scope: "1s", Limit: perSec, Cost: 1}}, make([]algorithms.Decision, 1)); err != nil {
		t.Fatal(err)
	}
	out := make([]algorithms.Decision, 3)
	reqs := []store.Request{
		{Key: "k", Scope: "1s", Limit: perSec, Cost: 1},
		{Key: "peeked", Scope: "1s", Limit: perSec, Cost: 1, DryRun: true},
		{Key: "k", Scope: "1m0s", Limit: perMin, Cost: 1},
	}
	if err := s.Decide(context.Background(), testkit.T0, reqs, out); err != nil || out[2].Allowed {
		t.Fatalf("raced call: %v %+v", err, out)
	}
	if got := left(t, sec, "peeked", perSec); got != 1 {
		t.Errorf("the dry run's key has %d left after the give-back, want 1 (nothing to give back)", got)
	}
	if got := left(t, sec, "k", perSec); got != 2 {
		t.Errorf("the charged key has %d left after the give-back, want 2", got)
	}

	sec2 := memstore.New(memstore.Config{})
	main2 := &racer{Store: memstore.New(memstore.Config{}), take: store.Request{Key: "k", Scope: "1m0s", Limit: perMin, Cost: 2}}
	s2 := splitstore.New(main2, refundFails{sec2})
	defer s2.Close()
	out = make([]algorithms.Decision, 2)
	if err := s2.Decide(context.Background(), testkit.T0, []store.Request{reqs[0], reqs[2]}, out); err != nil {
		t.Fatalf("a failed give-back made the denied call an error: %v", err)
	}
	if out[1].Allowed {
		t.Errorf("raced call allowed: %+v", out)
	}
	if got := left(t, sec2, "k", perSec); got != 1 {
		t.Errorf("after a failed give-back the per-second key has %d left, want 1 (the charge stays)", got)
	}
}

// TestDeniedCallRefundsNothing: a call that refunds on the per-second
// store and charges the main store, denied by the main store's charge
// after its look passed (a race), changes nothing: its refund is not
// made, as a single store's all-or-nothing call would not make it. A call
// that passes makes its refund.
func TestDeniedCallRefundsNothing(t *testing.T) {
	sec := memstore.New(memstore.Config{})
	main := &racer{Store: memstore.New(memstore.Config{}), take: store.Request{Key: "k", Scope: "1m0s", Limit: perMin, Cost: 2}}
	s := splitstore.New(main, sec)
	defer s.Close()
	if err := sec.Decide(context.Background(), testkit.T0, []store.Request{{Key: "k", Scope: "1s", Limit: perSec, Cost: 2}}, make([]algorithms.Decision, 1)); err != nil {
		t.Fatal(err)
	}
	reqs := []store.Request{{Key: "k", Scope: "1s", Limit: perSec, Cost: -1}, {Key: "k", Scope: "1m0s", Limit: perMin, Cost: 1}}
	out := make([]algorithms.Decision, 2)
	if err := s.Decide(context.Background(), testkit.T0, reqs, out); err != nil {
		t.Fatal(err)
	}
	if out[1].Allowed {
		t.Fatalf("the raced main store allowed: %+v", out)
	}
	if got := left(t, sec, "k", perSec); got != 0 {
		t.Errorf("after a denied call the per-second key has %d left, want 0 (its refund not made)", got)
	}
	// Without the race the call passes and the refund is made.
	reqs[1].Key = "other"
	if err := s.Decide(context.Background(), testkit.T0, reqs, out); err != nil || !out[1].Allowed || !out[0].Allowed {
		t.Fatalf("call: %v %+v", err, out)
	}
	if got := left(t, sec, "k", perSec); got != 1 || out[0].Remaining != 1 {
		t.Errorf("after a passing call the per-second key has %d left (answered %d), want 1", got, out[0].Remaining)
	}
}

// TestPartialFailure: when one store cannot decide and the other can, the
// call's error is a *store.PartialError naming the failed store's
// requests; the other store's decisions are looks, and nothing is charged
// on either store.
func TestPartialFailure(t *testing.T) {
	reqs := []store.Request{
		{Key: "k", Scope: "1s", Limit: perSec, Cost: 1},
		{Key: "k", Scope: "1m0s", Limit: perMin, Cost: 1},
		{Key: "j", Scope: "1s", Limit: perSec, Cost: 1},
	}
	for _, tc := range []struct {
		name      string
		main, sec func(store.Store) store.Store
		failed    []int
		healthy   []int
	}{
		{"main down", func(store.Store) store.Store { return failing{} }, func(s store.Store) store.Store { return s }, []int{1}, []int{0, 2}},
		{"per-second down", func(s store.Store) store.Store { return s }, func(store.Store) store.Store { return failing{} }, []int{0, 2}, []int{1}},
		{"main fails on its charge", func(s store.Store) store.Store { return &failAfterLook{Store: s} }, func(s store.Store) store.Store { return s }, []int{1}, []int{0, 2}},
		{"per-second fails on its charge", func(s store.Store) store.Store { return s }, func(s store.Store) store.Store { return &failAfterLook{Store: s} }, []int{0, 2}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mainMem, secMem := memstore.New(memstore.Config{}), memstore.New(memstore.Config{})
			s := splitstore.New(tc.main(mainMem), tc.sec(secMem))
			out := make([]algorithms.Decision, len(reqs))
			err := s.Decide(context.Background(), testkit.T0, reqs, out)
			pe := store.AsPartial(err)
			if pe == nil || !errors.Is(err, errDown) {
				t.Fatalf("error %v, want a partial error wrapping the failed store's", err)
			}
			if fmt.Sprint(pe.Failed) != fmt.Sprint(tc.failed) {
				t.Errorf("failed %v, want %v", pe.Failed, tc.failed)
			}
			for _, i := range tc.healthy {
				if !out[i].Allowed || out[i].Remaining != 1 || out[i].Limit != 2 {
					t.Errorf("request %d: %+v, want a look that allows with 1 left", i, out[i])
				}
			}
			for _, k := range []string{"k", "j"} {
				if left(t, mainMem, k, perMin) != 2 || left(t, secMem, k, perSec) != 2 {
					t.Errorf("key %s was charged", k)
				}
			}
		})
	}
}
