package observability

// The kind label of floodgate_givebacks_refused_total (internal/giveback).
const (
	GiveBackReset  = "reset"  // Reset
	GiveBackRefund = "refund" // a negative cost, a settlement below its reservation, Envoy's negative hits
)

// ObserveGiveBackRefused counts one give-back of kind (a GiveBack
// constant) that api's caller was refused.
func (m *Metrics) ObserveGiveBackRefused(api, kind string) {
	m.refused.WithLabelValues(api, kind).Inc()
}

// ObservePanic counts one panic caught under a handler of api.
func (m *Metrics) ObservePanic(api string) { m.panics.WithLabelValues(api).Inc() }
