package softlimit_test

import (
	"errors"
	"testing"

	"github.com/floodgate/floodgate/internal/softlimit"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want softlimit.Threshold
		err  string
	}{
		{"800", softlimit.Threshold{Count: 800}, ""},
		{"80%", softlimit.Threshold{Percent: 80}, ""},
		{" 80 % ", softlimit.Threshold{Percent: 80}, ""},
		{"1%", softlimit.Threshold{Percent: 1}, ""},
		{"100%", softlimit.Threshold{Percent: 100}, ""},
		{"0", softlimit.Threshold{}, `must be positive, got "0" (leave it out for no warning)`},
		{"0%", softlimit.Threshold{}, `must be positive, got "0%" (leave it out for no warning)`},
		{"-1", softlimit.Threshold{}, "must be positive, got -1"},
		{"101%", softlimit.Threshold{}, "must be a percentage from 1% to 100%, got 101%"},
		{"-5%", softlimit.Threshold{}, "must be a percentage from 1% to 100%, got -5%"},
		{"0.8", softlimit.Threshold{}, `must be a count of units (800) or a whole percentage of the limit (80%), got "0.8"`},
		{"", softlimit.Threshold{}, `must be a count of units (800) or a whole percentage of the limit (80%), got ""`},
		{"%", softlimit.Threshold{}, `must be a count of units (800) or a whole percentage of the limit (80%), got "%"`},
		{"80%%", softlimit.Threshold{}, `must be a count of units (800) or a whole percentage of the limit (80%), got "80%%"`},
		{"99999999999999999999", softlimit.Threshold{}, `must be a count of units (800) or a whole percentage of the limit (80%), got "99999999999999999999"`},
	}
	for _, tt := range tests {
		got, err := softlimit.Parse(tt.in)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("Parse(%q): %v", tt.in, err)
		case tt.err != "" && (err == nil || err.Error() != tt.err || !errors.Is(err, softlimit.ErrInvalid)):
			t.Errorf("Parse(%q) error: got %v, want %s (wrapping ErrInvalid)", tt.in, err, tt.err)
		case got != tt.want:
			t.Errorf("Parse(%q): got %+v, want %+v", tt.in, got, tt.want)
		}
		if tt.err == "" && got.String() != trim(tt.in) {
			t.Errorf("Parse(%q).String(): got %q", tt.in, got.String())
		}
	}
}

func trim(s string) string {
	out := []byte{}
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' {
			out = append(out, s[i])
		}
	}
	return string(out)
}

func TestValidate(t *testing.T) {
	tests := []struct {
		t        softlimit.Threshold
		capacity int64
		err      string
	}{
		{softlimit.Threshold{}, 10, ""},
		{softlimit.Threshold{Count: 10}, 10, ""},
		{softlimit.Threshold{Count: 11}, 10, "11 is above the limit's capacity of 10, so it would never warn"},
		{softlimit.Threshold{Count: -1}, 10, "must be positive, got -1"},
		{softlimit.Threshold{Percent: 100}, 10, ""},
		{softlimit.Threshold{Percent: 101}, 10, "must be a percentage from 1% to 100%, got 101%"},
		{softlimit.Threshold{Count: 5, Percent: 50}, 10, "takes a count or a percentage, not both"},
	}
	for _, tt := range tests {
		err := tt.t.Validate(tt.capacity)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.err {
			t.Errorf("%+v.Validate(%d): got %q, want %q", tt.t, tt.capacity, got, tt.err)
		}
	}
}

func TestAt(t *testing.T) {
	tests := []struct {
		t        softlimit.Threshold
		capacity int64
		want     int64
	}{
		{softlimit.Threshold{}, 1000, 0},
		{softlimit.Threshold{Count: 800}, 1000, 800},
		{softlimit.Threshold{Percent: 80}, 1000, 800},
		{softlimit.Threshold{Percent: 80}, 7, 6},  // 5.6 rounds up
		{softlimit.Threshold{Percent: 1}, 10, 1},  // 0.1 rounds up to 1
		{softlimit.Threshold{Percent: 100}, 7, 7}, // the whole capacity
		{softlimit.Threshold{Percent: 50}, 1 << 62, 1 << 61},
		{softlimit.Threshold{Percent: 99}, 1<<63 - 1, 9131138316486228049}, // no overflow: a 128-bit product, rounded up
	}
	for _, tt := range tests {
		if got := tt.t.At(tt.capacity); got != tt.want {
			t.Errorf("%+v.At(%d): got %d, want %d", tt.t, tt.capacity, got, tt.want)
		}
	}
}

func TestReached(t *testing.T) {
	tests := []struct {
		limit, remaining, at int64
		want                 bool
	}{
		{1000, 201, 800, false}, // 799 used: below
		{1000, 200, 800, true},  // 800 used: at
		{1000, 199, 800, true},  // 801 used: above
		{1000, 0, 1000, true},
		{1000, 1000, 0, false}, // no threshold
		{1000, 0, 0, false},
		{10, -3, 10, true}, // debt counts as nothing remaining
	}
	for _, tt := range tests {
		if got := softlimit.Reached(tt.limit, tt.remaining, tt.at); got != tt.want {
			t.Errorf("Reached(limit %d, remaining %d, at %d): got %v, want %v", tt.limit, tt.remaining, tt.at, got, tt.want)
		}
	}
}
