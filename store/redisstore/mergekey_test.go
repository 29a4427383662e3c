package redisstore

import "testing"

// TestMergeIgnoresFloodgateClock: calls made in different milliseconds of
// floodgate's clock (header.calMs, which only the calendar boundaries in
// each request depend on) share one script call, since their wire headers
// are equal; calls whose wire headers differ (now, keep, probe) or whose
// slots differ do not.
func TestMergeIgnoresFloodgateClock(t *testing.T) {
	mk := func(slot int, h header) *call {
		return &call{slot: slot, h: h, keys: []string{"k"}, buf: appendHeader(nil, h)}
	}
	base := header{nowMs: -1, keepMs: 5, calMs: 1000}
	tests := []struct {
		name  string
		calls []*call
		units int
	}{
		{"floodgate's clock moved", []*call{mk(0, base), mk(0, header{nowMs: -1, keepMs: 5, calMs: 1001}), mk(0, header{nowMs: -1, keepMs: 5, calMs: 9999})}, 1},
		{"now differs", []*call{mk(0, base), mk(0, header{nowMs: 7, keepMs: 5, calMs: 1000})}, 2},
		{"keep differs", []*call{mk(0, base), mk(0, header{nowMs: -1, keepMs: 6, calMs: 1000})}, 2},
		{"probe differs", []*call{mk(0, base), mk(0, header{nowMs: -1, keepMs: 5, probe: true, calMs: 1000})}, 2},
		{"slot differs", []*call{mk(0, base), mk(1, base)}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(merge(tc.calls)); got != tc.units {
				t.Fatalf("%d script calls, want %d", got, tc.units)
			}
		})
	}
}
