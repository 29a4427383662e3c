package testkit

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// descPattern reads a metric's name and variable labels from
// prometheus.Desc's String.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]*)", .*, variableLabels: \{([^}]*)\}\}$`)

// DeclaredMetrics returns, sorted, "name{label,...}" of every metric that
// register registers on the Registerer it is given: what metrics a
// package declares, without a series of each.
func DeclaredMetrics(t testing.TB, register func(prometheus.Registerer)) []string {
	t.Helper()
	var rec recorder
	register(&rec)
	var out []string
	for _, c := range rec.cs {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descPattern.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("unreadable metric description %s", d)
			}
			out = append(out, m[1]+"{"+m[2]+"}")
		}
	}
	slices.Sort(out)
	return out
}

// docPattern reads a metric from a doc comment's list of them:
// "//<tab>name{label,...}  kind" (no braces without labels).
var docPattern = regexp.MustCompile(`^//\s+(floodgate_\w+)(\{[^}]*\})?\s+(counter|gauge|histogram)\s*$`)

// MetricsAsDocumented fails t unless the floodgate_ metrics that register
// declares are, names and labels, those the comments of the Go file at
// path list, one a line as "//<tab>name{label,...}  kind".
func MetricsAsDocumented(t testing.TB, path string, register func(prometheus.Registerer)) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, line := range strings.Split(string(src), "\n") {
		if m := docPattern.FindStringSubmatch(line); m != nil {
			labels := m[2]
			if labels == "" {
				labels = "{}"
			}
			documented = append(documented, m[1]+labels)
		}
	}
	slices.Sort(documented)
	var declared []string
	for _, d := range DeclaredMetrics(t, register) {
		if strings.HasPrefix(d, "floodgate_") {
			declared = append(declared, d)
		}
	}
	if len(documented) == 0 || !slices.Equal(declared, documented) {
		t.Errorf("metrics declared:\n %q\nbut %s documents:\n %q", declared, path, documented)
	}
}

// recorder is a Registerer that keeps what it is given.
type recorder struct{ cs []prometheus.Collector }

func (r *recorder) Register(c prometheus.Collector) error {
	r.cs = append(r.cs, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) { r.cs = append(r.cs, cs...) }

func (r *recorder) Unregister(prometheus.Collector) bool { return false }
