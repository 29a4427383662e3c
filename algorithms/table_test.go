package algorithms

import "testing"

// TestRowsAreWhole: every row has its math, a calendar decision exactly
// when it counts in windows, so no algorithm of the table is decided or
// validated by another's code.
func TestRowsAreWhole(t *testing.T) {
	for _, a := range All() {
		r := rowOf(a)
		if r.decide == nil || r.validate == nil {
			t.Errorf("%v: a row without its decide or validate", a)
		}
		if (r.calendar != nil) != r.Window {
			t.Errorf("%v: Window is %v, and its calendar decision nil is %v", a, r.Window, r.calendar == nil)
		}
	}
	if len(All()) == 0 {
		t.Fatal("the table is empty")
	}
}

// TestNoRowDecidesNothing: a value without a row decides nothing: a deny
// that never passes, the state given back as it was.
func TestNoRowDecidesNothing(t *testing.T) {
	l := Limit{Algorithm: Algorithm(len(table)), Requests: 5, Period: 1000}
	s := State{A: 1, B: 2, C: 3}
	next, d := decide(l, s, ask{now: 10, cost: 1})
	if d.Allowed || d.RetryAfter != Never || next.A != s.A || next.B != s.B || next.C != s.C {
		t.Errorf("got %+v, %+v; want a deny with RetryAfter Never and the state unchanged", next, d)
	}
	if next, d = decideMode(l, s, ask{now: 10, cost: 1, mode: Debt}); d.Allowed || next.A != s.A || next.B != s.B || next.C != s.C {
		t.Errorf("debt: got %+v, %+v; want a deny and the state unchanged", next, d)
	}
	l = Limit{Algorithm: Algorithm(len(table)), Requests: 5, Calendar: Day}
	if next, d = decide(l, s, ask{now: 10, cost: 1}); d.Allowed || d.RetryAfter != Never || next.A != s.A || next.B != s.B || next.C != s.C {
		t.Errorf("calendar: got %+v, %+v; want a deny with RetryAfter Never and the state unchanged", next, d)
	}
}
