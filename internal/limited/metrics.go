package limited

import (
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxMetricKeys bounds the keys per rule a Collector exports.
const MaxMetricKeys = 10

// MetricKeyBytes is how much of a key a Collector puts in its label; a
// longer one is cut and ends with "…". With Config.Salt the label is the
// key's keyed hash, as in every view.
const MetricKeyBytes = 32

// Collector exports the n heaviest keys of each rule (n at most
// MaxMetricKeys) as the gauge floodgate_limited_key_denied: the key's
// denials over ShortWindow (decayed, as in Report), labelled with the
// rule's domain and name and the key, cut at MetricKeyBytes or hashed.
// Series stay bounded: Config.Rules × n.
type Collector struct {
	t     *Tracker
	n     int
	clock func() time.Time
	desc  *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector is the Collector of t's n heaviest keys per rule, read at
// clock's time.
func NewCollector(t *Tracker, n int, clock func() time.Time) *Collector {
	return &Collector{
		t: t, n: min(max(n, 1), MaxMetricKeys), clock: clock,
		desc: prometheus.NewDesc("floodgate_limited_key_denied",
			"Denials of one of a rule's heaviest keys over the last minute (decayed); the key is cut or hashed (--limited-metrics-keys).",
			[]string{"domain", "rule", "key"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	r := c.t.Report(c.clock(), Query{K: c.n})
	for _, rr := range r.Rules {
		seen := map[string]bool{} // two keys cut alike keep the first
		for _, k := range rr.Keys {
			label := metricKey(k.Key)
			if seen[label] {
				continue
			}
			seen[label] = true
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, k.Denied.M1, rr.Domain, rr.Rule, label)
		}
	}
}

// metricKey is key cut at MetricKeyBytes, on a rune boundary.
func metricKey(key string) string {
	if len(key) <= MetricKeyBytes {
		return key
	}
	cut := MetricKeyBytes
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return key[:cut] + "…"
}
