package server

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/floodgate/floodgate/internal/limited"
	"github.com/floodgate/floodgate/internal/localshare"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
)

// Settings are the optional knobs both decision APIs share, the
// RateLimiter (floodgate.v1, CheckSettings) and the Envoy service
// (EnvoySettings): the rules, store failure handling and observability.
// The zero value is usable.
type Settings struct {
	// Rules supplies the domains (Envoy API) and named policies (Check
	// API). nil means no config: every domain and policy is unknown, so
	// every Envoy request is OK (as envoyproxy/ratelimit answers an unknown
	// domain) and the Check API takes inline limits only.
	Rules RuleSource
	// MaxKeyBytes bounds a Check key, an Envoy domain and each Envoy entry's
	// key. 0 means DefaultMaxKeyBytes. Envoy descriptor values are not
	// bounded: a downstream client controls them (see Envoy).
	MaxKeyBytes int
	// FailureMode applies to inline limits and to rules that do not set
	// one: what to answer when the store cannot decide. The zero value
	// (rules.FailureDefault) means open.
	FailureMode rules.FailureMode
	// Local decides the limits whose failure mode is local while the store
	// cannot decide: the replica's share of each limit, in its memory. The
	// server gives both APIs the same one. nil means a share of its own
	// with the whole limit (one replica).
	Local *localshare.Share
	// Clock reads the time, once per request. nil means time.Now.
	Clock func() time.Time
	// Logger receives store failures and internal errors. nil means
	// slog.Default().
	Logger *slog.Logger
	// Metrics counts decisions; nil counts nothing.
	Metrics *observability.Metrics
	// Limited counts each rule's denied keys (GET /debug/limited); nil
	// counts nothing. Decisions the store could not make (degraded) and
	// looks (cost 0) are not counted.
	Limited *limited.Tracker
	// Tracer starts the spans of matching and of the store calls, children
	// of the call's span when that one is recording. nil traces nothing.
	Tracer trace.Tracer
	// TraceValues puts the keys and descriptor values into the spans (off
	// by default: they can be personal data).
	TraceValues bool
}

// CheckSettings are the RateLimiter's knobs: the shared Settings and its
// own. The zero value is usable.
type CheckSettings struct {
	Settings
	// API is the api label of its decisions in the metrics and its store
	// failure logs: which front door asked. "" means
	// observability.APICheck (gRPC); the HTTP/JSON API's RateLimiter has
	// observability.APIHTTP.
	API string
}

// EnvoySettings are the Envoy service's knobs: the shared Settings and its
// own. The zero value is usable.
type EnvoySettings struct {
	Settings
	// ShadowMode, when set, puts every limit in shadow mode: decide and
	// count, but always answer OK.
	ShadowMode bool
	// QuotaMode, when set, puts every limit in quota mode (as rule's
	// quota_mode: true): the request is over the limit only when a limit not
	// in quota mode is over, or every quota-mode descriptor is.
	QuotaMode bool
	// DynamicMetadata fills RateLimitResponse.dynamic_metadata as
	// envoyproxy/ratelimit does with RESPONSE_DYNAMIC_METADATA=true.
	DynamicMetadata bool
	// CountDeniedHits counts the hits of a denied request, as
	// envoyproxy/ratelimit does by default: every descriptor's hits are
	// charged (as debt, algorithms.Debt), and each descriptor is over when
	// its hits did not fit. Off, a request is decided all or nothing: a
	// denied request charges nothing.
	CountDeniedHits bool
	// ShareOverrideCounters counts a descriptor's limit override under the
	// key of the rule the descriptor matches (the reference's behaviour), so
	// a changed override keeps the count; an override without a matching
	// rule counts under a key of the descriptor and the override's unit.
	// Off, each override rate counts apart.
	ShareOverrideCounters bool
	// NoHeaders turns off the rate-limit response headers.
	NoHeaders bool
	// ReferenceHeaders, when set, answers with envoyproxy/ratelimit's
	// three response headers, under these names, in place of floodgate's.
	ReferenceHeaders *ReferenceHeaders
	// DetailedMetricSeries is how many request values per rule the rules
	// with detailed_metric or value_to_metric may show in the rule label of
	// the metrics (see Metrics.ObserveDetailedDecision). 0, the default,
	// shows none: such rules are counted under their name, like every other
	// rule, so no caller's value (an API key) reaches the unauthenticated
	// /metrics without the operator's opt-in.
	DetailedMetricSeries int
	// NoRefunds refuses every refund (is_negative_hits): the descriptor is
	// decided as 0 hits. Otherwise refunds pass the give-back rule
	// (internal/giveback), as Reset does.
	NoRefunds bool
}
