// Package api serves floodgate's two decision APIs on a store:
// floodgate.v1.RateLimiter (Check, CheckBatch, Peek, Reset; RateLimiter)
// and Envoy's envoy.service.ratelimit.v3 ShouldRateLimit (Envoy). It
// validates requests, resolves their limits from the rules
// (RuleSource) or inline, asks the store, answers by the failure modes
// when the store cannot decide, and maps errors to gRPC status codes in
// one place (status.go). Transport, auth and metrics are other packages'
// jobs: internal/server assembles them.
package api
