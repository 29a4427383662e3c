package simulate

import (
	"testing"
	"time"
)

func TestShortDuration(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{20 * time.Second, "20s"},
		{time.Minute, "1m"},
		{90 * time.Second, "1m30s"},
		{time.Hour, "1h"},
		{time.Hour + time.Minute, "1h1m"},
		{2 * time.Hour, "2h"},
		{36 * time.Hour, "36h"},
		{1500 * time.Millisecond, "1.5s"},
		{250 * time.Millisecond, "250ms"},
		{500 * time.Millisecond, "500ms"},
	} {
		if got := ShortDuration(tc.in); got != tc.want {
			t.Errorf("ShortDuration(%v): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
