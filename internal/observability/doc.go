// Package observability is floodgate's Prometheus metrics (Metrics, with
// the gRPC server metrics and the InstrumentStore decorator that times
// every store call) and the summarised log of the store's failed
// decisions (FailureLog).
package observability
