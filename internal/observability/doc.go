// Package observability is floodgate's Prometheus metrics (Metrics, with
// the gRPC server metrics and the InstrumentStore decorator that times
// every store call), the summarised log of the store's failed decisions
// (FailureLog), the limiter of repeated log lines (LogLimiter) and the
// status an HTTP handler answered (StatusRecorder).
package observability
