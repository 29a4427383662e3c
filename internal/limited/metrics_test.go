package limited

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCollector(t *testing.T) {
	tr := New(Config{})
	long := strings.Repeat("x", 40) + "secret-tail"
	for i, k := range []string{"a", "b", "c", long} {
		for range 10 + i {
			tr.ObserveCheck(t0, "api", false, inline, k, 1, false)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(tr, 3, func() time.Time { return t0 }))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got = append(got, fmt.Sprintf("%s %s/%s %s %v", mf.GetName(), labels["domain"], labels["rule"], labels["key"], m.GetGauge().GetValue()))
		}
	}
	want := []string{
		"floodgate_limited_key_denied /api b 11",
		"floodgate_limited_key_denied /api c 12",
		"floodgate_limited_key_denied /api xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx… 13",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestCollectorBounds(t *testing.T) {
	if got := NewCollector(New(Config{}), 50, nil).n; got != MaxMetricKeys {
		t.Errorf("n %d, want %d", got, MaxMetricKeys)
	}
	if got := metricKey(strings.Repeat("é", 20)); got != strings.Repeat("é", 16)+"…" {
		t.Errorf("cut %q", got)
	}
}
