// Package server is floodgate's gRPC server: its two decision APIs on a
// store, floodgate.v1.RateLimiter (Check, CheckBatch, Peek, Reset;
// RateLimiter) and Envoy's envoy.service.ratelimit.v3 ShouldRateLimit
// (Envoy), and their assembly into one server with interceptors, health and
// reflection (NewGRPCServer), the transport limits that admit connections
// and calls (Gate, GRPCLimitOptions), and the admin HTTP handler (/healthz,
// /readyz, /metrics, pprof). It validates requests, resolves their limits
// from the rules (RuleSource) or inline, asks the store, answers by the
// failure modes when the store cannot decide, and maps errors to gRPC
// status codes in one place (status.go). The optional front doors live
// below it: httpapi (HTTP/JSON) and rlqs (Envoy's quota stream).
//
// The API follows floodgate's releases: v0, no compatibility promise yet.
package server
