package positive

import (
	"testing"
	"time"
)

func TestOr(t *testing.T) {
	for _, tc := range []struct {
		v, def, want int64
	}{
		{v: 5, def: 3, want: 5},
		{v: 1, def: 3, want: 1},
		{v: 0, def: 3, want: 3},
		{v: -1, def: 3, want: 3},
	} {
		if got := Or(tc.v, tc.def); got != tc.want {
			t.Errorf("Or(%d, %d) = %d, want %d", tc.v, tc.def, got, tc.want)
		}
	}
	if got := Or(time.Duration(0), time.Second); got != time.Second {
		t.Errorf("Or(0s, 1s) = %v, want 1s", got)
	}
	if got := Or(uint32(7), 9); got != 7 {
		t.Errorf("Or(7, 9) = %d, want 7", got)
	}
	if got := Or(0.5, 1); got != 0.5 {
		t.Errorf("Or(0.5, 1) = %v, want 0.5", got)
	}
}
