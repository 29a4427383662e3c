package observability

import "github.com/floodgate/floodgate/algorithms"

// The results of a settlement (floodgate_settlements_total).
const (
	SettleDebt      = "debt"      // actual above reserved: charged as debt
	SettleRefund    = "refund"    // actual below reserved: the rest given back
	SettleEven      = "even"      // actual equal to reserved: nothing to charge
	SettleDuplicate = "duplicate" // a retry of a settlement already made: nothing charged
	SettleConflict  = "conflict"  // the idempotency key was used with other numbers: refused
	SettleDegraded  = "degraded"  // the store could not settle: the caller retries
)

// ObserveSettle counts one settlement of api (APICheck or APIHTTP) on a
// limit of algorithm alg with result (one of the Settle constants), and
// the units it could not record.
func (m *Metrics) ObserveSettle(api string, alg algorithms.Algorithm, result string, unrecorded int64) {
	a := alg.String()
	m.settlements.WithLabelValues(api, a, result).Inc()
	if unrecorded > 0 {
		m.unrecorded.WithLabelValues(api, a).Add(float64(unrecorded))
	}
}
