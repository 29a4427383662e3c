package testkit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// failures is a testing.TB that counts Errorf calls instead of failing.
type failures struct {
	testing.TB
	n int
}

func (f *failures) Helper()               {}
func (f *failures) Errorf(string, ...any) { f.n++ }

// TestMetricsAsDocumented: the declared metrics must match the doc's
// list, names and labels, and a doc listing none fails too.
func TestMetricsAsDocumented(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.go")
	doc := "// metrics, not in order:\n//\n//\tfloodgate_b  gauge\n//\tfloodgate_a_total{x,y}  counter\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	declare := func(bLabel string, aLabels ...string) func(prometheus.Registerer) {
		return func(reg prometheus.Registerer) {
			reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "floodgate_a_total", Help: "a"}, aLabels))
			if bLabel == "" {
				reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "floodgate_b", Help: "b"}))
			} else {
				reg.MustRegister(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "floodgate_b", Help: "b"}, []string{bLabel}))
			}
			reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "go_other_total", Help: "not floodgate's"}))
		}
	}
	for _, tc := range []struct {
		name     string
		register func(prometheus.Registerer)
		fails    bool
	}{
		{"as documented", declare("", "x", "y"), false},
		{"labels in another order", declare("", "y", "x"), true},
		{"a label too many", declare("z", "x", "y"), true},
		{"one missing", func(reg prometheus.Registerer) {
			reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "floodgate_b", Help: "b"}))
		}, true},
	} {
		f := &failures{TB: t}
		MetricsAsDocumented(f, path, tc.register)
		if (f.n > 0) != tc.fails {
			t.Errorf("%s: %d failures, want failing %v", tc.name, f.n, tc.fails)
		}
	}

	empty := filepath.Join(t.TempDir(), "empty.go")
	if err := os.WriteFile(empty, []byte("package x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &failures{TB: t}
	MetricsAsDocumented(f, empty, func(prometheus.Registerer) {})
	if f.n == 0 {
		t.Error("a file documenting no metrics: no failure")
	}
}
