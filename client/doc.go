// Package client is the Go client of floodgate's Check API, with a gRPC
// server interceptor and net/http middleware built on it.
//
// # The client
//
// Dial a floodgate and check keys against inline limits or named policies:
//
//	c, err := client.Dial("127.0.0.1:8081")
//	...
//	d, err := c.Check(ctx, "user:42", client.Limit{
//		Algorithm: client.TokenBucket, Requests: 60, Period: time.Minute, Burst: 600,
//	})
//	if !d.Allowed { /* wait d.RetryAfter */ }
//
//	d, err = c.Check(ctx, "login:alice", client.Policy("login"))
//
// Being over the limit is a Decision with Allowed false; an error means
// floodgate could not decide and wraps the gRPC status, so status.Code(err)
// tells InvalidArgument (a bad limit or key), NotFound (an unknown policy),
// Unavailable or DeadlineExceeded apart.
//
// New wraps a connection you already have; it applies WithTimeout and
// WithToken and refuses the options only Dial can apply.
//
// Dial's defaults suit a decision on a request path:
//
//   - plaintext, unless WithTLS: right for a sidecar or loopback floodgate;
//     use TLS for anything crossing a network. WithToken adds a bearer
//     token and is refused over plaintext to a non-loopback address.
//   - every call bounded by DefaultTimeout (100ms; WithTimeout changes it);
//   - no retries: the service config sets no retry policy and retries are
//     disabled even if a resolver's config enables them, because a Check
//     whose reply was lost may already have been charged, and a retry would
//     charge it twice. The caller's failure mode decides instead.
//   - no waiting for a connection (waitForReady off): an unreachable
//     floodgate fails the call at once with Unavailable.
//
// # gRPC services
//
// UnaryServerInterceptor and StreamServerInterceptor limit every call by a
// KeyFunc (KeyByMethod, KeyByMetadata, KeyByPeer, combined with KeyFirst and
// KeyJoin). A call whose KeyFunc gives no key is keyed by its peer address
// (IPv6 by its /64), never let through unlimited; InterceptorConfig.Exempt
// skips calls on purpose. A key read from caller-written metadata
// (KeyByMetadata) also spends the peer's limit, so made-up API keys never
// escape it, unless InterceptorConfig.TrustMetadata says an earlier
// interceptor verified the key. A denied call fails with
// codes.ResourceExhausted carrying an errdetails.RetryInfo with the exact
// wait, and ratelimit-limit, ratelimit-remaining, ratelimit-reset and
// retry-after trailers; allowed calls get the first three as headers. When
// floodgate cannot decide, the FailureMode answers: FailOpen (the zero
// value) lets the call through, FailClosed fails it with
// codes.Unavailable. A configuration error (a rejected or missing token, an
// unknown policy, an invalid limit) is never failed open: the call fails
// with codes.Internal and the error is logged once.
//
// # HTTP services
//
// Middleware limits a request by its client IP and, when it carries an API
// key, by the key too, in one all-or-nothing batch (as the seeds advise: an
// IP limit alone is beaten by rotating IPs, a key limit alone by rotating
// made-up keys). A key HTTPConfig.VerifyAPIKey accepts is limited alone;
// one it rejects counts as none. It writes RateLimit, RateLimit-Policy and
// X-RateLimit-* headers (the scheme the Envoy API writes too), answers 429 with Retry-After and a JSON body, and fails open or
// closed (503) when floodgate is down; a configuration error answers 500
// and is logged once. The client IP comes from r.RemoteAddr unless
// HTTPConfig.TrustedProxyHops says how many proxies of yours append to
// X-Forwarded-For (see there for why the header is not trusted by
// default); an entry's port and brackets are dropped, and an entry that is
// no IP address falls back to r.RemoteAddr.
package client
