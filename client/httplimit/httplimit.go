// Package httplimit limits the requests of a net/http server with
// floodgate: Middleware asks a client.Client about each request.
//
// Middleware limits a request by its client IP and, when it carries an API
// key, by the key too, in one all-or-nothing batch (an IP limit alone is
// beaten by rotating IPs, a key limit alone by rotating made-up keys). A
// key Config.VerifyAPIKey accepts is limited alone; one it rejects counts
// as none. It writes RateLimit, RateLimit-Policy and X-RateLimit-* headers
// (the scheme the Envoy API writes too), answers 429 with Retry-After and a
// JSON body, and fails open or closed (503) when floodgate is down; a
// configuration error answers 500 and is logged once. The client IP comes
// from r.RemoteAddr unless Config.TrustedProxyHops says how many proxies
// of yours append to X-Forwarded-For (see there for why the header is not
// trusted by default); an entry's port and brackets are dropped, and an
// entry that is no IP address falls back to r.RemoteAddr.
package httplimit

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/keying"
	"github.com/floodgate/floodgate/client/internal/verdict"
	"github.com/floodgate/floodgate/internal/ratelimitheader"
)

// DefaultAPIKeyHeader is the header Middleware reads API keys from when
// Config.APIKeyHeader is empty.
const DefaultAPIKeyHeader = "X-API-Key"

// DefaultIPv6Prefix is how many leading bits of an IPv6 address name one
// client: a subscriber usually holds a whole /64 and can rotate through it.
const DefaultIPv6Prefix = keying.DefaultIPv6Prefix

// Config configures Middleware.
type Config struct {
	// Limit applies to API keys (and to IPs when IPLimit is zero).
	// Required.
	Limit client.Limit
	// IPLimit applies to client IPs. The zero value means Limit. Anonymous
	// traffic often deserves less than a keyed client.
	IPLimit client.Limit
	// APIKeyHeader carries the API key. "" means DefaultAPIKeyHeader. A
	// missing or blank key is no key: the request is limited by its IP.
	APIKeyHeader string
	// VerifyAPIKey, if set, says whether a request's API key is genuine
	// (known to you and not revoked). The middleware cannot tell by itself,
	// so without VerifyAPIKey a keyed request is limited by its IP and by
	// its key at once, in one all-or-nothing CheckBatch (a deny on either
	// charges neither): an abuser rotating made-up keys still hits the IP
	// limit, and one rotating IPs still hits the key limit. With it, a key
	// it accepts is limited by the key alone (so customers behind one NAT
	// do not share a limit) and a key it rejects counts as no key (the IP
	// limit alone; your handler then refuses the request).
	VerifyAPIKey func(r *http.Request, key string) bool
	// PerIPAndKey limits keys VerifyAPIKey accepts by IP as well as by key.
	// Unverified keys are always limited by both.
	PerIPAndKey bool
	// TrustedProxyHops is the number of reverse proxies in front of this
	// server that append to X-Forwarded-For. 0 (the default) ignores the
	// header and uses r.RemoteAddr. With n > 0 the client IP is the n-th
	// address from the right of X-Forwarded-For: the one your outermost
	// proxy saw. Never use the left-most entry, and never set this without
	// such proxies: the client writes whatever it likes into the header,
	// and trusting it lets anyone pick a fresh IP (and a fresh limit) per
	// request.
	TrustedProxyHops int
	// IPv6Prefix is how many leading bits of an IPv6 client address form
	// its key. 0 means DefaultIPv6Prefix; 128 keys each address.
	IPv6Prefix int
	// KeyPrefix is put before every key, e.g. "api:".
	KeyPrefix string
	// FailureMode applies when floodgate cannot decide (unreachable, too
	// slow). The zero value is client.FailOpen; client.FailClosed answers
	// 503. A configuration error (see client.FailureMode) is never served
	// open: it answers 500 and is logged once.
	FailureMode client.FailureMode
	// Timeout bounds the call to floodgate. 0 means the client's timeout.
	Timeout time.Duration
	// OnError, if set, is told every error from floodgate (before the
	// failure mode applies), e.g. to log or count it.
	OnError func(r *http.Request, err error)
	// Logger receives configuration errors, once each. nil means
	// slog.Default().
	Logger *slog.Logger
}

// Middleware limits every request by its client IP and, when it carries an
// API key, by the key too (a key Config.VerifyAPIKey accepts: by the key
// alone), and writes the numbers as headers, in the one scheme floodgate's
// Envoy API writes too (internal/ratelimitheader):
//
//	RateLimit-Policy: "apikey";q=60;w=60   (IETF httpapi draft; the policy)
//	RateLimit: "apikey";r=42;t=23          (what remains; seconds to reset)
//	X-RateLimit-Limit: 60, 60;w=60         (draft-03, for older clients)
//	X-RateLimit-Remaining: 42
//	X-RateLimit-Reset: 23                  (seconds, as in draft-03)
//	Retry-After: 23                        (on 429 only)
//	RateLimit-Warning: "apikey";at=48      (past the soft limit; allowed only)
//
// RateLimit-Warning lists the limits whose warning threshold (the
// soft limit: client.Limit.WarnAt, or a server-side policy's warn_at)
// the request reached, each with the threshold in units of q: the
// caller is still served, and should slow down before it is not.
//
// The policy is named "apikey" or "ip" after the limit the headers
// describe, or after the server-side policy when the limit is one (whose
// window the middleware does not know: RateLimit-Policy and the ";w=" of
// X-RateLimit-Limit are then left out). A bucket (a limit with a burst)
// advertises its burst as q over the time it takes to refill, so q/w is
// its sustained rate. Every time is rounded up to a whole second, so a client that waits
// as told is never early. When two limits apply, the headers describe the
// more restrictive; when both could have given the decision, the IP limit.
//
// A denied request gets 429 with the JSON body
// {"error":"rate_limited","retry_after_seconds":N}. When floodgate cannot
// decide within the timeout, client.FailOpen serves the request without
// headers and client.FailClosed answers 503 {"error":"rate_limiter_unavailable"}. When
// floodgate says the setup is wrong (a rejected token, an unknown policy,
// an invalid limit), the request is answered 500
// {"error":"rate_limiter_misconfigured"} in either mode, and the error is
// logged to Config.Logger once. When floodgate's own store could not
// decide (a degraded answer), nothing is known about the quota: only
// X-RateLimit-Degraded: true is written, with Retry-After on a 429.
func Middleware(c *client.Client, cfg Config) func(http.Handler) http.Handler {
	if cfg.APIKeyHeader == "" {
		cfg.APIKeyHeader = DefaultAPIKeyHeader
	}
	if cfg.IPLimit == (client.Limit{}) {
		cfg.IPLimit = cfg.Limit
	}
	if cfg.IPv6Prefix <= 0 || cfg.IPv6Prefix > 128 {
		cfg.IPv6Prefix = DefaultIPv6Prefix
	}
	if cfg.Timeout > 0 {
		c = c.WithTimeout(cfg.Timeout)
	}
	misconf := verdict.NewMisconfigLog(cfg.Logger)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, nl, warned, err := decideHTTP(r.Context(), c, &cfg, r)
			if err != nil {
				if r.Context().Err() != nil {
					return // the client went away; nobody reads an answer
				}
				if cfg.OnError != nil {
					cfg.OnError(r, err)
				}
				if verdict.IsConfigError(err) {
					misconf.Failed(r.Context(), "http middleware", err)
					writeJSON(w, http.StatusInternalServerError, `{"error":"rate_limiter_misconfigured"}`)
					return
				}
				if cfg.FailureMode == client.FailClosed {
					h := w.Header()
					h.Set("Retry-After", "1")
					writeJSON(w, http.StatusServiceUnavailable, `{"error":"rate_limiter_unavailable"}`)
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			misconf.OK()
			pol := headerLimit(nl, d)
			writeHeaders(w.Header(), pol, d)
			if d.Allowed && !d.Degraded && len(warned) > 0 {
				w.Header().Set(ratelimitheader.WarningName, strings.Join(warned, ", "))
			}
			if !d.Allowed {
				retry := strconv.FormatInt(ratelimitheader.RetryAfterSeconds(pol, d.RetryAfter), 10)
				writeJSON(w, http.StatusTooManyRequests, `{"error":"rate_limited","retry_after_seconds":`+retry+`}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// decideHTTP asks floodgate about one request and returns the decision the
// headers describe, and the RateLimit-Warning members of the limits whose
// decisions warn (Decision.Warning).
func decideHTTP(ctx context.Context, c *client.Client, cfg *Config, r *http.Request) (client.Decision, namedLimit, []string, error) {
	ipKey := cfg.KeyPrefix + "ip:" + clientIP(r, cfg.TrustedProxyHops, cfg.IPv6Prefix)
	apiKey := strings.TrimSpace(r.Header.Get(cfg.APIKeyHeader))
	verified := false
	if apiKey != "" && cfg.VerifyAPIKey != nil {
		if !cfg.VerifyAPIKey(r, apiKey) {
			apiKey = "" // not a key: limited as a request without one
		}
		verified = true
	}
	byIP, byKey := namedLimit{"ip", cfg.IPLimit}, namedLimit{"apikey", cfg.Limit}
	switch {
	case apiKey == "":
		d, err := c.Check(ctx, client.Request{Key: ipKey, Limit: cfg.IPLimit})
		return d, byIP, warnings([]namedLimit{byIP}, d), err
	case verified && !cfg.PerIPAndKey:
		d, err := c.Check(ctx, client.Request{Key: cfg.KeyPrefix + "apikey:" + keying.Hash(apiKey), Limit: cfg.Limit})
		return d, byKey, warnings([]namedLimit{byKey}, d), err
	}
	// The key first: when both limits say the same, the headers name the
	// limit the caller chose by sending a key.
	b, err := c.CheckBatch(ctx,
		client.Request{Key: cfg.KeyPrefix + "apikey:" + keying.Hash(apiKey), Limit: cfg.Limit},
		client.Request{Key: ipKey, Limit: cfg.IPLimit})
	if err != nil {
		return client.Decision{}, namedLimit{}, nil, err
	}
	d, i := verdict.Combined(b)
	nls := []namedLimit{byKey, byIP}
	return d, nls[i], warnings(nls, b.Decisions...), nil
}

// warnings are the RateLimit-Warning members of the decisions ds (of the
// limits nls) that warn.
func warnings(nls []namedLimit, ds ...client.Decision) []string {
	var out []string
	for i, d := range ds {
		if d.Warning {
			out = append(out, ratelimitheader.WarningMember(nls[i].headerName(), d.WarnAt))
		}
	}
	return out
}

// namedLimit is a limit with the name its headers give it.
type namedLimit struct {
	name  string
	limit client.Limit
}

// headerName is the policy name nl's headers give it: a server-side
// policy's own name, else "ip" or "apikey".
func (nl namedLimit) headerName() string {
	if nl.limit.Policy != "" {
		return nl.limit.Policy
	}
	return nl.name
}

// writeHeaders writes the rate-limit fields of d under pol (see
// Middleware); a degraded answer gets X-RateLimit-Degraded and, when
// denied, Retry-After only.
func writeHeaders(h http.Header, pol ratelimitheader.Limit, d client.Decision) {
	ratelimitheader.SetHTTP(h, pol, verdict.State(d), d.Degraded)
}

// headerLimit is the limit d's headers describe, as a quota policy: the
// one that decided ("ip" or "apikey"), a server-side policy by its own
// name.
func headerLimit(nl namedLimit, d client.Decision) ratelimitheader.Limit {
	switch l := nl.limit; {
	case l.Policy != "":
		return ratelimitheader.Limit{Name: l.Policy, Quota: d.Limit}
	default:
		return ratelimitheader.Of(nl.name, algorithms.Limit{Algorithm: algorithms.Algorithm(l.Algorithm), Requests: l.Requests, Period: l.Period, Burst: l.Burst})
	}
}

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body + "\n"))
}

// clientIP is the request's client address as a key: from RemoteAddr, or
// from X-Forwarded-For behind hops trusted proxies; IPv6 addresses cut to
// their first v6Bits bits. An X-Forwarded-For entry may carry a port or
// brackets ("203.0.113.7:40001", "[2001:db8::1]:443"); one that is no IP
// address at all, or a header with fewer than hops entries, falls back to
// RemoteAddr, so no value a client can write becomes a fresh key.
func clientIP(r *http.Request, hops, v6Bits int) string {
	if hops > 0 {
		var all []string
		for _, v := range r.Header.Values("X-Forwarded-For") {
			all = append(all, strings.Split(v, ",")...)
		}
		if len(all) >= hops {
			if addr, ok := keying.ParseHostAddr(all[len(all)-hops]); ok {
				return keying.AddrKey(addr, v6Bits)
			}
		}
	}
	if addr, ok := keying.ParseHostAddr(r.RemoteAddr); ok {
		return keying.AddrKey(addr, v6Bits)
	}
	s := r.RemoteAddr
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	return s // not an IP (a unix socket, a test): key it as it is
}
