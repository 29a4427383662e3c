package main

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// parseFailure is the flag whose value the flag package could not set
// during a parse: describeValues records it, explainParseError reports it.
type parseFailure struct {
	flag  *flag.Flag
	value string
	err   error
}

// recordingValue is a flag's value while parseFlags parses: it records the
// first value its Set refuses.
type recordingValue struct {
	flag.Value
	f      *flag.Flag
	failed *parseFailure
}

func (r *recordingValue) Set(s string) error {
	err := r.Value.Set(s)
	if err != nil { // the flag package stops at the first refused value
		*r.failed = parseFailure{flag: r.f, value: s, err: err}
	}
	return err
}

// recordingBool is a recordingValue for a boolean flag, which the flag
// package lets stand alone (--pprof) when its value says IsBoolFlag.
type recordingBool struct{ *recordingValue }

func (recordingBool) IsBoolFlag() bool { return true }

// describeValues wraps every flag's value in fs so that a refused value is
// recorded; restore puts the values back.
func describeValues(fs *flag.FlagSet) (failed *parseFailure, restore func()) {
	failed = &parseFailure{}
	orig := map[*flag.Flag]flag.Value{}
	fs.VisitAll(func(f *flag.Flag) {
		orig[f] = f.Value
		rv := &recordingValue{Value: f.Value, f: f, failed: failed}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			f.Value = recordingBool{rv}
		} else {
			f.Value = rv
		}
	})
	return failed, func() {
		for f, v := range orig {
			f.Value = v
		}
	}
}

// explainParseError rewrites an error of fs.Parse as one line that names
// the flag, the value and the form wanted, or, for an unknown flag, the
// nearest known one; each ends with a pointer to the command's --help.
func explainParseError(fs *flag.FlagSet, failed *parseFailure, err error) error {
	help := fmt.Sprintf("(floodgate %s --help lists every flag)", commandName(fs))
	if failed.flag != nil {
		return fmt.Errorf("--%s %q: %s %s", failed.flag.Name, failed.value, wantedForm(failed.flag, failed.err), help)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		if near := nearestFlag(fs, name); near != "" {
			return fmt.Errorf("unknown flag --%s; did you mean --%s? %s", name, near, help)
		}
		return fmt.Errorf("unknown flag --%s %s", name, help)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return fmt.Errorf("--%s needs a value %s", strings.TrimLeft(name, "-"), help)
	}
	return fmt.Errorf("%v %s", err, help)
}

// wantedForm says what form flag f takes, given the error its Set
// returned: the flag package's own types answer only "parse error", so
// their form is spelled out; other values' errors already say it.
func wantedForm(f *flag.Flag, err error) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err.Error()
	}
	rangeErr := strings.Contains(err.Error(), "out of range")
	switch g.Get().(type) {
	case time.Duration:
		return "want a duration: a number with a unit (ns, us, ms, s, m, h), such as 250ms, 10s or 1m30s"
	case bool:
		return "want true or false"
	case int, int64:
		if rangeErr {
			return "out of range for an integer"
		}
		return "want an integer, such as 100"
	case uint, uint64:
		if rangeErr {
			return "out of range for an integer"
		}
		return "want a whole number (0 or more), such as 100"
	case float64:
		return "want a number, such as 0.5"
	}
	return err.Error()
}

// commandName is the command fs parses for ("serve", "config explain"):
// its name up to the first argument placeholder.
func commandName(fs *flag.FlagSet) string {
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
// when none is close: within an edit distance of a third of the name's
// length (at least 2), or one the name starts or ends.
func nearestFlag(fs *flag.FlagSet, name string) string {
	best, bestDist := "", 0
	limit := max(2, len(name)/3)
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(name, f.Name)
		if d > limit && !strings.HasPrefix(f.Name, name) && !strings.HasPrefix(name, f.Name) {
			return
		}
		if best == "" || d < bestDist || (d == bestDist && f.Name < best) {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
