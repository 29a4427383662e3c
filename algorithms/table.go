package algorithms

import (
	"fmt"
	"strings"
)

// Algorithm names a counting algorithm. The numbers are floodgate.v1's
// Algorithm enum values, so a value converts directly.
type Algorithm int32

// The algorithms. The zero value is not an algorithm.
const (
	Unspecified      Algorithm = 0
	TokenBucket      Algorithm = 1
	SlidingWindow    Algorithm = 2
	SlidingWindowLog Algorithm = 3
	FixedWindow      Algorithm = 4
	LeakyBucket      Algorithm = 5
)

// The algorithms a limit takes when it names none.
const (
	// Default is what a limit on floodgate's own API takes when it names
	// no algorithm (a policy, the command line's --limit, a load test's
	// check): one that takes a burst and carries no window edge.
	Default = TokenBucket
	// Compatible counts as envoyproxy/ratelimit does, in windows that
	// start afresh at their boundary: what Envoy rules, Envoy's own
	// per-descriptor limits and xDS limits take when they name none, and
	// what a calendar quota takes when the default counts in no windows.
	Compatible = FixedWindow
)

// Facts are what floodgate knows of an algorithm besides its math: one
// row of the table that the stores, the server, the rules, the client,
// the command line's help and the Lua constants all read, so that none
// of them names an algorithm to decide what it takes or how it answers.
type Facts struct {
	// Name is the config-file name, e.g. "token_bucket". The proto enum
	// value is Wire.
	Name string
	// Wire is the proto enum value's name, e.g. "ALGORITHM_TOKEN_BUCKET".
	Wire string
	// Redis is the short name of its state in the Redis store's keys,
	// e.g. "fw". It changes when the state's layout does, so that
	// replicas of two versions running side by side keep their states
	// apart and the old keys expire by themselves.
	Redis string
	// Burst is what Limit.Burst means for it, e.g. "burst" or "queue
	// size"; "" when it takes none (Limit.Burst must then be 0). A limit
	// that takes a burst has it as its capacity (Limit.Capacity).
	Burst string
	// Window reports whether it counts in windows: of Period, aligned to
	// the Unix epoch, or of a calendar period (Limit.Calendar), which
	// only such an algorithm takes.
	Window bool
	// GiveBack reports whether a check may give units back (a negative
	// cost): a caller that will not use what it was admitted.
	GiveBack bool
	// Waits reports whether it admits with a Wait (Decision.Wait) rather
	// than denying; NoWait makes it deny instead.
	Waits bool
	// Log reports whether its State is a log (State.Log and three
	// integers) rather than three integers alone.
	Log bool
	// Bucket reports whether its rate reads as a bucket's in rate-limit
	// headers (a refill rate and a burst) rather than a window's
	// (Requests per Period).
	Bucket bool
	// Afresh reports whether its count starts afresh at each window's
	// boundary, a debt included, so that what a window recorded never
	// weighs on the next: only there may a denied request's hits be
	// counted (Envoy's counting of denied hits) without locking out a
	// client that keeps retrying.
	Afresh bool
}

// row is one algorithm: its facts and its math.
type row struct {
	Facts
	// decide is the decision without a calendar: in Debt mode a positive
	// cost is recorded even when it does not fit, within the debt bound
	// (Debt), and Decision.Debt is what the key owes after it.
	decide func(l Limit, s State, a ask) (State, Decision)
	// calendar is the decision in the calendar period of b that a.now
	// falls in (decideCalendar has checked the cost and the range); nil
	// for an algorithm that takes no calendar (Facts.Window false).
	calendar func(l Limit, s State, b Bounds, a ask) (State, Decision)
	// validate checks the bounds l's numbers must keep for it (Validate
	// has checked the fields every algorithm shares).
	validate func(l Limit) error
}

// table holds every algorithm, indexed by its Algorithm value. A value
// without a row (its Name "") is no algorithm: Valid is false, Validate
// refuses it, and nothing decides it. It is filled once, by init (its
// functions read it), and never changed.
var table []row

func init() {
	table = []row{
		TokenBucket: {
			Facts:  Facts{Name: "token_bucket", Redis: "tat", Burst: "burst", Bucket: true},
			decide: tokenBucket, validate: validateBucket("burst"),
		},
		SlidingWindow: {
			Facts:  Facts{Name: "sliding_window", Redis: "sw", Window: true},
			decide: slidingWindow, calendar: slidingCalendar, validate: validateSlidingWindow,
		},
		SlidingWindowLog: {
			Facts:  Facts{Name: "sliding_window_log", Redis: "swl2", Log: true},
			decide: slidingLog, validate: validateSlidingLog,
		},
		FixedWindow: {
			Facts:  Facts{Name: "fixed_window", Redis: "fw", Window: true, Afresh: true},
			decide: fixedWindow, calendar: fixedCalendar, validate: validateWindow,
		},
		LeakyBucket: {
			Facts:  Facts{Name: "leaky_bucket", Redis: "lb", Burst: "burst, the queue's size", GiveBack: true, Waits: true, Bucket: true},
			decide: decideLeakyBucket, validate: validateBucket("burst (queue size)"),
		},
	}
	for i := range table {
		if table[i].Name != "" {
			table[i].Wire = "ALGORITHM_" + strings.ToUpper(table[i].Name)
		}
	}
}

// rowOf is a's row, nil when a is no algorithm.
func rowOf(a Algorithm) *row {
	if a <= 0 || int(a) >= len(table) || table[a].Name == "" {
		return nil
	}
	return &table[a]
}

// All lists every algorithm, in enum order.
func All() []Algorithm {
	var out []Algorithm
	for a := range table {
		if rowOf(Algorithm(a)) != nil {
			out = append(out, Algorithm(a))
		}
	}
	return out
}

// Facts are a's facts; the zero Facts when a is no algorithm.
func (a Algorithm) Facts() Facts {
	if r := rowOf(a); r != nil {
		return r.Facts
	}
	return Facts{}
}

// String returns the config-file name of a, e.g. "token_bucket".
func (a Algorithm) String() string {
	if r := rowOf(a); r != nil {
		return r.Name
	}
	return fmt.Sprintf("algorithm(%d)", int32(a))
}

// Valid reports whether a is one of the algorithms.
func (a Algorithm) Valid() bool { return rowOf(a) != nil }

// ParseAlgorithm reads a config-file name such as "sliding_window".
func ParseAlgorithm(name string) (Algorithm, error) {
	for _, a := range All() {
		if table[a].Name == name {
			return a, nil
		}
	}
	return Unspecified, fmt.Errorf("unknown algorithm %q (want %s)", name, Names(All(), "or", Algorithm.String))
}

// Names lists algs as a sentence, "a, b and c" with and as the last
// joining word, each spelled by name (Algorithm.String for config names,
// or a Facts field): what a message or a help text says.
func Names(algs []Algorithm, and string, name func(Algorithm) string) string {
	var b strings.Builder
	for i, a := range algs {
		switch {
		case i == 0:
		case i == len(algs)-1:
			b.WriteString(" " + and + " ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(name(a))
	}
	return b.String()
}

// Which lists the algorithms whose facts have has, in enum order:
// Which(func(f Facts) bool { return f.Burst != "" }) are those that
// take a burst.
func Which(has func(Facts) bool) []Algorithm {
	var out []Algorithm
	for _, a := range All() {
		if has(a.Facts()) {
			out = append(out, a)
		}
	}
	return out
}
