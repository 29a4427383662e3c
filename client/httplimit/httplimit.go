// Package httplimit limits the requests of a net/http server with
// floodgate: Middleware asks a client.Client about each request.
package httplimit

import (
	"cmp"
	"context"
	"log/slog"
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
	// VerifyAPIKey, if set, says whether a request's API key is genuine.
	// Without it a keyed request is limited by IP and key at once, in one
	// all-or-nothing batch, so rotating either made-up keys or IPs still
	// hits a limit. With it, an accepted key is limited by the key alone
	// (customers behind one NAT do not share a limit) and a rejected one
	// counts as no key.
	VerifyAPIKey func(r *http.Request, key string) bool
	// PerIPAndKey limits keys VerifyAPIKey accepts by IP as well as by key.
	// Unverified keys are always limited by both.
	PerIPAndKey bool
	// TrustedProxyHops is the number of your reverse proxies that append
	// to X-Forwarded-For; the client IP is the n-th address from its right.
	// 0 ignores the header: a client writes whatever it likes into it, so
	// trusting it without such proxies gives anyone a fresh limit per
	// request.
	TrustedProxyHops int
	// IPv6Prefix is how many leading bits of an IPv6 client address form
	// its key. 0 means DefaultIPv6Prefix; 128 keys each address.
	IPv6Prefix int
	// KeyPrefix is put before every key, e.g. "api:".
	KeyPrefix string
	// FailureMode applies when floodgate cannot decide; the zero value is
	// client.FailOpen, client.FailClosed answers 503. A configuration error
	// answers 500 in either mode.
	FailureMode client.FailureMode
	// Timeout bounds the call to floodgate. 0 means the client's timeout.
	Timeout time.Duration
	// OnError, if set, is told every error from floodgate.
	OnError func(r *http.Request, err error)
	// Logger receives configuration errors, once each; nil: slog.Default().
	Logger *slog.Logger
}

// Middleware limits every request by its client IP and, when it carries an
// API key, by the key too, and writes the rate-limit headers of the more
// restrictive limit in the scheme the Envoy API writes (docs/envoy.md),
// its policy named "apikey", "ip" or after a server-side policy.
//
// A denied request gets 429 with {"error":"rate_limited",
// "retry_after_seconds":N}. When floodgate cannot decide, FailOpen serves
// the request without headers and FailClosed answers 503
// {"error":"rate_limiter_unavailable"}. When floodgate says the setup is
// wrong (a rejected token, an unknown policy, an invalid limit) it answers
// 500 {"error":"rate_limiter_misconfigured"} and logs the error once.
func Middleware(c *client.Client, cfg Config) func(http.Handler) http.Handler {
	cfg.APIKeyHeader = cmp.Or(cfg.APIKeyHeader, DefaultAPIKeyHeader)
	cfg.IPLimit = cmp.Or(cfg.IPLimit, cfg.Limit)
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
					w.Header().Set("Retry-After", "1")
					writeJSON(w, http.StatusServiceUnavailable, `{"error":"rate_limiter_unavailable"}`)
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			misconf.OK()
			pol := headerLimit(nl, d)
			ratelimitheader.SetHTTP(w.Header(), pol, verdict.State(d), d.Degraded)
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
func (nl namedLimit) headerName() string { return cmp.Or(nl.limit.Policy, nl.name) }

// headerLimit is the limit d's headers describe, as a quota policy: the
// one that decided ("ip" or "apikey"), a server-side policy by its own
// name.
func headerLimit(nl namedLimit, d client.Decision) ratelimitheader.Limit {
	l := nl.limit
	if l.Policy != "" {
		return ratelimitheader.Limit{Name: l.Policy, Quota: d.Limit}
	}
	return ratelimitheader.Of(nl.name, algorithms.Limit{Algorithm: l.Algorithm, Requests: l.Requests, Period: l.Period, Burst: l.Burst})
}

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body + "\n"))
}

// clientIP is the request's client address as a key: from RemoteAddr, or
// from X-Forwarded-For behind hops trusted proxies; IPv6 addresses cut to
// v6Bits. An entry that is no IP address (ports and brackets are dropped),
// or too few entries, falls back to RemoteAddr, so no value a client
// writes becomes a fresh key.
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
	return keying.HostKey(r.RemoteAddr, v6Bits) // not an IP (a unix socket, a test): its host as it is
}
