// Package softlimit is a limit's warning threshold, its soft limit: the
// usage at which an allowed decision says "slow down" before decisions
// are denied. A threshold is a count of units ("800") or a whole
// percentage of the limit's capacity (algorithms.Limit.Capacity, "80%").
package softlimit

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Threshold is a warning threshold; the zero value is none. At most one
// of Count and Percent is set.
type Threshold struct {
	// Count is the threshold in units used.
	Count int64
	// Percent is the threshold as a whole percentage of the capacity,
	// 1 to 100.
	Percent int64
}

// ErrInvalid is wrapped by the errors of Parse and Validate.
var ErrInvalid = errors.New("invalid warning threshold")

// IsZero reports whether t is no threshold.
func (t Threshold) IsZero() bool { return t.Count == 0 && t.Percent == 0 }

// String is t as written in a config: "800", "80%", or "" for none.
func (t Threshold) String() string {
	switch {
	case t.Percent != 0:
		return strconv.FormatInt(t.Percent, 10) + "%"
	case t.Count != 0:
		return strconv.FormatInt(t.Count, 10)
	}
	return ""
}

// Parse reads a threshold as written in a config. The error wraps
// ErrInvalid and reads after the setting's name ("warn_at must be
// positive, got -5").
func Parse(s string) (Threshold, error) {
	num, percent := strings.CutSuffix(strings.TrimSpace(s), "%")
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil {
		return Threshold{}, &parseError{fmt.Sprintf("must be a count of units (800) or a whole percentage of the limit (80%%), got %q", s)}
	}
	t := Threshold{Count: n}
	if percent {
		t = Threshold{Percent: n}
	}
	if n == 0 {
		return Threshold{}, &parseError{fmt.Sprintf("must be positive, got %q (leave it out for no warning)", s)}
	}
	if err := t.check(); err != nil {
		return Threshold{}, err
	}
	return t, nil
}

// parseError is a message that reads after a setting's name.
type parseError struct{ msg string }

func (e *parseError) Error() string { return e.msg }
func (e *parseError) Unwrap() error { return ErrInvalid }

// check verifies t on its own: not negative, a percentage at most 100,
// not both forms.
func (t Threshold) check() error {
	switch {
	case t.Count != 0 && t.Percent != 0:
		return &parseError{"takes a count or a percentage, not both"}
	case t.Count < 0:
		return &parseError{fmt.Sprintf("must be positive, got %d", t.Count)}
	case t.Percent < 0 || t.Percent > 100:
		return &parseError{fmt.Sprintf("must be a percentage from 1%% to 100%%, got %d%%", t.Percent)}
	}
	return nil
}

// Validate checks t against a limit of the given capacity, which a count
// must not exceed (it could never be reached). The error is as Parse's.
func (t Threshold) Validate(capacity int64) error {
	if err := t.check(); err != nil {
		return err
	}
	if t.Count > capacity {
		return &parseError{fmt.Sprintf("%d is above the limit's capacity of %d, so it would never warn", t.Count, capacity)}
	}
	return nil
}

// At is t in units of a limit of the given capacity: Count, or Percent
// of the capacity rounded up (at least 1); 0 for no threshold.
func (t Threshold) At(capacity int64) int64 {
	if t.Percent <= 0 || capacity <= 0 {
		return max(t.Count, 0)
	}
	// capacity·percent/100, rounded up, in 128 bits.
	hi, lo := bits.Mul64(uint64(capacity), uint64(t.Percent))
	q, r := bits.Div64(hi, lo, 100)
	if r != 0 {
		q++
	}
	return max(int64(q), 1)
}

// Reached reports whether a decision that left remaining of limit has
// used at least at units; never for at ≤ 0. Only an allowed, known
// decision warns: the caller checks that.
func Reached(limit, remaining, at int64) bool {
	return at > 0 && limit-max(remaining, 0) >= at
}
