package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/spf13/pflag"
)

// explainParseError rewrites an error of fs.Parse as one line that names
// the flag, the value and the form wanted, or, for an unknown flag, the
// nearest known one; each ends with a pointer to the command's --help.
func explainParseError(fs *pflag.FlagSet, err error) error {
	help := fmt.Sprintf("(floodgate %s --help lists every flag)", commandName(fs))
	if invalid, ok := errors.AsType[*pflag.InvalidValueError](err); ok {
		return fmt.Errorf("--%s %q: %s %s", invalid.GetFlag().Name, invalid.GetValue(), wantedForm(invalid.GetFlag(), invalid.GetValue(), invalid.Unwrap()), help)
	}
	if noValue, ok := errors.AsType[*pflag.ValueRequiredError](err); ok {
		return fmt.Errorf("--%s needs a value %s", noValue.GetFlag().Name, help)
	}
	if unknown, ok := errors.AsType[*pflag.NotExistError](err); ok && unknown.GetSpecifiedName() != "" {
		name := unknown.GetSpecifiedName()
		if near := nearestFlag(fs, name); near != "" {
			return fmt.Errorf("unknown flag --%s; did you mean --%s? %s", name, near, help)
		}
		return fmt.Errorf("unknown flag --%s %s", name, help)
	}
	return fmt.Errorf("%v %s", err, help)
}

// wantedForm says what form flag f takes, given the value refused and the
// error its Set returned: pflag's own types answer only "must be an
// integer" and the like, so their form is spelled out; other values'
// errors already say it.
func wantedForm(f *pflag.Flag, value string, err error) string {
	_, e := strconv.ParseInt(strings.TrimPrefix(value, "-"), 10, 64)
	rangeErr := errors.Is(e, strconv.ErrRange)
	switch f.Value.Type() {
	case "duration":
		return "want a duration: a number with a unit (ns, us, ms, s, m, h), such as 250ms, 10s or 1m30s"
	case "bool":
		return "want true or false"
	case "int", "int64":
		if rangeErr {
			return "out of range for an integer"
		}
		return "want an integer, such as 100"
	case "uint", "uint64":
		if rangeErr {
			return "out of range for an integer"
		}
		return "want a whole number (0 or more), such as 100"
	case "float64":
		return "want a number, such as 0.5"
	}
	return err.Error()
}

// commandName is the command fs parses for ("serve", "config explain"):
// its name up to the first argument placeholder.
func commandName(fs *pflag.FlagSet) string {
	var words []string
	for _, w := range strings.Fields(fs.Name()) {
		if strings.HasPrefix(w, "[") || strings.ToUpper(w) == w {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// nearestFlag is the flag of fs closest to the unknown name typed, or ""
// when none is close (see nearest).
func nearestFlag(fs *pflag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return nearest(name, names)
}

// nearest is the one of names closest to the unknown name typed, or ""
// when none is close: within an edit distance of a third of the name's
// length (at least 2), or one the name starts or ends. Of two as near,
// the first in name order.
func nearest(typed string, names []string) string {
	best, bestDist := "", 0
	limit := max(2, len(typed)/3)
	for _, n := range names {
		d := levenshtein.ComputeDistance(typed, n)
		if d > limit && !strings.HasPrefix(n, typed) && !strings.HasPrefix(typed, n) {
			continue
		}
		if best == "" || d < bestDist || (d == bestDist && n < best) {
			best, bestDist = n, d
		}
	}
	return best
}
