// Package server assembles floodgate's servers from the other packages:
// the gRPC server with its services, interceptors, health and reflection
// (NewGRPCServer), the transport limits that admit connections and calls
// (Gate, GRPCLimitOptions), and the admin HTTP handler (/healthz,
// /readyz, /metrics, pprof, the HTTP/JSON API).
package server
