// Package ratelimitheader is the one place that writes floodgate's
// rate-limit response headers, for the Envoy API and the HTTP middleware
// (client/httplimit) alike. docs/envoy.md documents the scheme: the
// headers, their Structured Field syntax (RFC 9651), what q and w mean for
// a bucket, and why a limit that never lifts advertises NeverSeconds.
//
// Every time is rounded up to whole seconds (Seconds), so a client that
// waits as told is never early. A degraded answer (AppendDegraded) knows
// nothing of the quota and writes no made-up zero.
package ratelimitheader

import (
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// The header names, as net/http canonicalises them; Field.LowerName gives
// the lower-case forms HTTP/2 and Envoy use.
const (
	PolicyName     = "RateLimit-Policy"
	RateLimitName  = "RateLimit"
	XLimitName     = "X-RateLimit-Limit"
	XRemainingName = "X-RateLimit-Remaining"
	XResetName     = "X-RateLimit-Reset"
	RetryAfterName = "Retry-After"
	DegradedName   = "X-RateLimit-Degraded"
	WarningName    = "RateLimit-Warning"
)

// NeverSeconds is the wait advertised for a request no wait lets through:
// a day, so that no client loops on it.
const NeverSeconds = 86400

// Limit is a limit as a quota policy: its name and its q and w.
type Limit struct {
	// Name names the policy, e.g. a rule's name from the config.
	Name string
	// Quota is q: the units a client may spend per Window.
	Quota int64
	// Window is w. 0 means unknown (a named policy seen from the client):
	// RateLimit-Policy and X-RateLimit-Limit's ";w=" are left out.
	Window time.Duration
	// DenyAll marks a rule that denies every request (Quota is then 0).
	DenyAll bool
	// WarnAt is the warning threshold in units of Quota; 0 means none.
	WarnAt int64
}

// Of is the policy of limit l under name.
func Of(name string, l algorithms.Limit) Limit {
	if l.Algorithm.Facts().Bucket {
		return Bucket(name, l.Requests, l.Period, l.Burst)
	}
	return Window(name, l.Requests, l.Period)
}

// Window is the policy of a window algorithm: requests per period.
func Window(name string, requests int64, period time.Duration) Limit {
	return Limit{Name: name, Quota: requests, Window: period}
}

// Bucket is the policy of a bucket (burst 0 means requests): q is the
// burst and w the time it takes to refill, rounded up.
func Bucket(name string, requests int64, period time.Duration, burst int64) Limit {
	if burst <= 0 {
		burst = requests
	}
	l := Limit{Name: name, Quota: burst}
	if requests <= 0 || period <= 0 {
		return l
	}
	// burst·period/requests in 128 bits: both factors may be large.
	hi, lo := bits.Mul64(uint64(burst), uint64(period))
	if hi >= uint64(requests) {
		l.Window = 1<<63 - 1
		return l
	}
	q, r := bits.Div64(hi, lo, uint64(requests))
	if r != 0 {
		q++
	}
	l.Window = time.Duration(min(q, 1<<63-1))
	return l
}

// DenyAll is the policy of a rule that denies every request; period is the
// rule's configured period (0 means one second).
func DenyAll(name string, period time.Duration) Limit {
	return Limit{Name: name, Window: max(period, time.Second), DenyAll: true}
}

// State is what a decision left of a limit.
type State struct {
	// Remaining is what can be spent now (negative counts as 0).
	Remaining int64
	// ResetAfter is the wait until the quota is whole again.
	ResetAfter time.Duration
	// Denied says the request was refused; Retry-After is written.
	Denied bool
	// RetryAfter is the wait until the request would pass when Denied;
	// negative means never (algorithms.Never).
	RetryAfter time.Duration
	// Warning says the allowed request reached Limit.WarnAt.
	Warning bool
}

// MoreRestrictive reports whether an answer covering several decisions
// should describe a rather than b: a deny beats an allow, a longer wait a
// shorter one (never is the longest), fewer remaining more; false on
// equals, so the first is described.
func MoreRestrictive(a, b State) bool {
	switch {
	case a.Denied != b.Denied:
		return a.Denied
	case a.Denied && waitOf(a) != waitOf(b):
		return waitOf(a) > waitOf(b)
	}
	return a.Remaining < b.Remaining
}

// waitOf is a deny's wait, with never as the longest.
func waitOf(s State) time.Duration {
	if s.RetryAfter < 0 {
		return 1<<63 - 1
	}
	return s.RetryAfter
}

// Field is one header: its canonical name and its value.
type Field struct{ Name, Value string }

// lowerNames are the header names in lower case.
var lowerNames = map[string]string{
	PolicyName:     "ratelimit-policy",
	RateLimitName:  "ratelimit",
	XLimitName:     "x-ratelimit-limit",
	XRemainingName: "x-ratelimit-remaining",
	XResetName:     "x-ratelimit-reset",
	RetryAfterName: "retry-after",
	DegradedName:   "x-ratelimit-degraded",
	WarningName:    "ratelimit-warning",
}

// LowerName is the field's name in lower case, as HTTP/2 and Envoy's
// response_headers_to_add write it.
func (f Field) LowerName() string {
	if n, ok := lowerNames[f.Name]; ok {
		return n
	}
	return strings.ToLower(f.Name)
}

// Append appends to dst the fields describing s under l; a caller that
// writes one limit's fields often should Prepare it once.
func Append(dst []Field, l Limit, s State) []Field {
	p := Prepare(l)
	return p.Append(dst, s)
}

// Policy is a Limit with its request-independent header values built
// once. It is immutable, so safe for concurrent use.
type Policy struct {
	limit  Limit
	policy string // RateLimit-Policy; "" when the window is unknown
	xlimit string // X-RateLimit-Limit
	head   string // RateLimit up to its r value: `"name";r=`
	warn   string // the member of RateLimit-Warning: `"name";at=800`; "" for none
}

// Prepare builds the request-independent header values of l.
func Prepare(l Limit) Policy {
	name := String(l.Name)
	q := strconv.FormatInt(max(l.Quota, 0), 10)
	if l.DenyAll {
		q = "0"
	}
	p := Policy{limit: l, xlimit: q, head: name + ";r="}
	if l.WarnAt > 0 && !l.DenyAll {
		p.warn = WarningMember(l.Name, l.WarnAt)
	}
	if l.Window > 0 {
		w := strconv.FormatInt(max(Seconds(l.Window), 1), 10)
		p.policy = name + ";q=" + q + ";w=" + w
		p.xlimit = q + ", " + q + ";w=" + w
	}
	return p
}

// WarningMember is p's member of RateLimit-Warning, or "" when the limit
// has no warning threshold.
func (p *Policy) WarningMember() string { return p.warn }

// WarningMember is the member of RateLimit-Warning naming the policy name
// with the warning threshold at: `"name";at=800`.
func WarningMember(name string, at int64) string {
	return String(name) + ";at=" + strconv.FormatInt(at, 10)
}

// AppendWarning appends RateLimit-Warning listing members (each a
// Policy.WarningMember); nothing when there are none.
func AppendWarning(dst []Field, members ...string) []Field {
	if len(members) == 0 {
		return dst
	}
	return append(dst, Field{WarningName, strings.Join(members, ", ")})
}

// Append appends to dst the fields describing s under p's limit.
func (p *Policy) Append(dst []Field, s State) []Field {
	// One allocation: `"name";r=R;t=T` then Retry-After's value; the
	// X-RateLimit fields and Retry-After are slices of it.
	var buf [96]byte
	r, t := max(s.Remaining, 0), Seconds(s.ResetAfter)
	if p.limit.DenyAll {
		r, t = 0, NeverSeconds
	}
	b := append(buf[:0], p.head...)
	rStart := len(b)
	b = strconv.AppendInt(b, r, 10)
	rEnd := len(b)
	b = append(b, ";t="...)
	tStart := len(b)
	b = strconv.AppendInt(b, t, 10)
	tEnd := len(b)
	if s.Denied {
		b = strconv.AppendInt(b, RetryAfterSeconds(p.limit, s.RetryAfter), 10)
	}
	v := string(b)
	if p.policy != "" {
		dst = append(dst, Field{PolicyName, p.policy})
	}
	dst = append(dst,
		Field{RateLimitName, v[:tEnd]},
		Field{XLimitName, p.xlimit},
		Field{XRemainingName, v[rStart:rEnd]},
		Field{XResetName, v[tStart:tEnd]},
	)
	if s.Denied {
		dst = append(dst, Field{RetryAfterName, v[tEnd:]})
	} else if s.Warning && p.warn != "" {
		dst = append(dst, Field{WarningName, p.warn})
	}
	return dst
}

// AppendDegraded appends the fields of an answer the store could not
// decide: X-RateLimit-Degraded and, when denied, Retry-After.
func AppendDegraded(dst []Field, denied bool, retryAfter time.Duration) []Field {
	dst = append(dst, Field{DegradedName, "true"})
	if denied {
		dst = append(dst, Field{RetryAfterName, strconv.FormatInt(RetryAfterSeconds(Limit{}, retryAfter), 10)})
	}
	return dst
}

// RetryAfterSeconds is the Retry-After of a request l denied: NeverSeconds
// for a deny-all rule or a never wait, else at least 1.
func RetryAfterSeconds(l Limit, retryAfter time.Duration) int64 {
	if l.DenyAll || retryAfter < 0 {
		return NeverSeconds
	}
	return max(Seconds(retryAfter), 1)
}

// Seconds is d in whole seconds, rounded up (1001ms is 2); 0 for d ≤ 0.
// Every time floodgate writes in whole seconds is rounded by it.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

// String is s as a Structured Field String (RFC 9651): quoted, '"' and
// '\' escaped, other non-printable bytes and '%' as lower-case %xx.
func String(s string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e || c == '%':
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// SetHTTP sets on h the fields of one decision under l: Append's, or
// AppendDegraded's when the store could not decide (degraded), for the
// HTTP front doors (the client middleware and the server's HTTP/JSON API).
func SetHTTP(h http.Header, l Limit, s State, degraded bool) {
	var buf [8]Field
	fs := buf[:0]
	if degraded {
		fs = AppendDegraded(fs, s.Denied, s.RetryAfter)
	} else {
		fs = Append(fs, l, s)
	}
	for _, f := range fs {
		h.Set(f.Name, f.Value)
	}
}
