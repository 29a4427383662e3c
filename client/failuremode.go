package client

// FailureMode says what the HTTP middleware (client/httplimit) and the gRPC
// interceptors (client/grpclimit) do when floodgate cannot decide because
// it is unreachable or too slow.
//
// It does not apply to configuration errors, which no outage explains and
// which failing open would hide: a token floodgate rejects or lacks, an
// unknown policy, a limit or key floodgate rejects, a server that is no
// floodgate. Those reject the request (gRPC Internal, HTTP 500) in either
// mode and are logged once, until a decision succeeds again.
type FailureMode int

const (
	// FailOpen lets the call through unlimited. The zero value: an outage
	// of the limiter should not become an outage of the service.
	FailOpen FailureMode = iota
	// FailClosed rejects the call (gRPC Unavailable, HTTP 503). Use it where
	// an unlimited request is worse than none: login, OTP, payments.
	FailClosed
)
