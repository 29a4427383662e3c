package observability

import "github.com/prometheus/client_golang/prometheus"

// The kind label of floodgate_givebacks_refused_total (internal/giveback).
const (
	GiveBackReset  = "reset"  // Reset
	GiveBackRefund = "refund" // a negative cost, a settlement below its reservation, Envoy's negative hits
)

// guardMetrics count what the guarantees of a limit turned away or caught.
type guardMetrics struct {
	refused *prometheus.CounterVec
	panics  *prometheus.CounterVec
}

func newGuardMetrics(d Declarer) guardMetrics {
	return guardMetrics{
		refused: d.CounterVec("floodgate_givebacks_refused_total",
			"Give-backs the authorization rule refused, by front door (api) and kind (reset, refund); on the Envoy API a refused refund is decided as 0 hits.",
			"api", "kind"),
		panics: d.CounterVec("floodgate_handler_panics_total",
			"Panics caught under a decision handler, by front door (api); on the Envoy API each is answered by the limits' failure modes.",
			"api"),
	}
}

// ObserveGiveBackRefused counts one give-back of kind (a GiveBack
// constant) that api's caller was refused.
func (m *Metrics) ObserveGiveBackRefused(api, kind string) {
	m.guards.refused.WithLabelValues(api, kind).Inc()
}

// ObservePanic counts one panic caught under a handler of api.
func (m *Metrics) ObservePanic(api string) { m.guards.panics.WithLabelValues(api).Inc() }
