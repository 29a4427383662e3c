package algorithms_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// epoch is the fixed start of every step table. Its Unix time,
// 946684800000 ms, is a multiple of every period the tables use, so t0 is a
// window edge.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// step is one row of a step table: move the clock by advance (negative moves
// it back), spend cost, and expect the decision's numbers.
type step struct {
	advance time.Duration
	cost    int64

	allowed   bool
	remaining int64
	retry     time.Duration
	reset     time.Duration
	// limit, when set, replaces the table's limit from this row on.
	limit *algorithms.Limit
}

// stepOutcome is the part of a Decision a step checks, printed the same way
// for got and want.
type stepOutcome struct {
	Allowed    bool
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
}

func (o stepOutcome) String() string {
	return fmt.Sprintf("allowed=%v remaining=%d retry_after=%v reset_after=%v", o.Allowed, o.Remaining, o.RetryAfter, o.ResetAfter)
}

// runSteps plays steps from epoch against l starting at state s and returns
// the final state. Besides each row's numbers it checks what holds for
// every decision: Limit is the capacity, TTL covers ResetAfter, and a deny
// or a peek hands back the very state it was given.
func runSteps(t *testing.T, l algorithms.Limit, s algorithms.State, steps []step) algorithms.State {
	t.Helper()
	now := epoch
	for i, st := range steps {
		if st.limit != nil {
			l = *st.limit
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("step %d: limit %+v: %v", i, l, err)
		}
		now = now.Add(st.advance)
		next, d := algorithms.Decide(l, s, now, st.cost)
		got := stepOutcome{d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter}
		want := stepOutcome{st.allowed, st.remaining, st.retry, st.reset}
		if got != want {
			t.Errorf("step %d (t0+%v, cost %d): got %v, want %v", i, now.Sub(epoch), st.cost, got, want)
		}
		if d.Limit != l.Capacity() {
			t.Errorf("step %d: got Limit %d, want %d", i, d.Limit, l.Capacity())
		}
		if d.TTL < d.ResetAfter {
			t.Errorf("step %d: got TTL %v below ResetAfter %v", i, d.TTL, d.ResetAfter)
		}
		if (!d.Allowed || st.cost == 0) && !sameState(next, s) {
			t.Errorf("step %d: a deny or a peek changed the state: got %+v, want %+v", i, next, s)
		}
		s = next
	}
	return s
}

// sameState reports whether a and b are the same struct, down to sharing
// the log's backing array.
func sameState(a, b algorithms.State) bool {
	if a.A != b.A || a.B != b.B || a.C != b.C || len(a.Log) != len(b.Log) {
		return false
	}
	if len(a.Log) > 0 && &a.Log[0] != &b.Log[0] {
		return false
	}
	return reflect.DeepEqual(a.Log, b.Log)
}

func TestEpochIsAWindowEdge(t *testing.T) {
	for _, p := range []time.Duration{time.Second, 2 * time.Second, time.Minute, time.Hour} {
		if got := epoch.UnixMilli() % p.Milliseconds(); got != 0 {
			t.Errorf("epoch mod %v: got %d, want 0", p, got)
		}
	}
}
