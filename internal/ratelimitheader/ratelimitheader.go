// Package ratelimitheader is the one place that writes floodgate's
// rate-limit response headers, for the Envoy API (api.Envoy) and the
// HTTP middleware (client/httplimit) alike, so both speak one scheme:
//
//	RateLimit-Policy: "name";q=10;w=10      the quota policy (IETF httpapi draft)
//	RateLimit: "name";r=7;t=3               what remains of it, and when it resets
//	X-RateLimit-Limit: 10, 10;w=10          draft-03, for older clients and Envoy's own
//	X-RateLimit-Remaining: 7
//	X-RateLimit-Reset: 3                    delta seconds, as in draft-03 (not a Unix time)
//	Retry-After: 1                          on a denied request only
//	RateLimit-Warning: "name";at=8          on an allowed request past the soft limit
//
// RateLimit-Policy and RateLimit are Structured Field Lists (RFC 9651)
// with one member: the policy name as a String, with Integer parameters.
// X-RateLimit-Limit is a List of Integers, the other X- fields and
// Retry-After Integers.
//
// # What q and w mean
//
// For the window algorithms q is the requests per period and w the
// period. A bucket (algorithms.Facts.Bucket) of r requests per period p
// with burst b advertises q=b with w the time the
// bucket takes to refill b tokens, b·p/r, rounded up to whole seconds: a
// client that spends q per w never waits and sends at the bucket's
// sustained rate (60/min burst 10 is q=10;w=10, not q=10;w=60, which would
// understate it six-fold). Rounding w up errs on the safe side: q/w is never
// above the sustained rate. When the whole burst refills in under a second,
// w is 1 and q the burst, which understates the rate; such buckets are rare.
//
// For RateLimit, r is what can be spent now (for a bucket, whole tokens)
// and t the seconds until the quota is whole again. Every time is
// rounded up to whole seconds, so a client that waits as told is never
// early.
//
// A rule that denies everything (requests_per_unit: 0) has q=0; its t,
// X-RateLimit-Reset and Retry-After are NeverSeconds rather than 0, which
// would invite a client to retry at once, in a loop. A request that can
// never pass (its cost is above the limit's capacity) gets Retry-After
// NeverSeconds too.
//
// # The soft limit
//
// A limit may carry a warning threshold (its soft limit): the units used
// at which an allowed request is told to slow down before requests are
// denied. An allowed request that leaves at least that many units of q
// used gets RateLimit-Warning, a Structured Field List (RFC 9651) of the
// limits past their threshold: each the policy name as a String, as in
// RateLimit, with the Integer parameter at, the threshold in units of q.
// A denied request never carries it, nor a degraded one (nothing is known
// of the usage). A client sees the usage itself in RateLimit: q − r.
//
// When the store could not decide (a degraded answer, see AppendDegraded),
// nothing is known about the quota: only X-RateLimit-Degraded and, on a
// denial, Retry-After are written, never a made-up zero.
package ratelimitheader

import (
	"math/bits"
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

// NeverSeconds is the wait advertised for a request that no wait will let
// through (a deny-all rule, a cost above the capacity): one day, long
// enough that no client loops on it.
const NeverSeconds = 86400

// Limit is a limit as a quota policy: its name and its q and w.
type Limit struct {
	// Name names the policy, e.g. a rule's name from the config.
	Name string
	// Quota is q: the units a client may spend per Window.
	Quota int64
	// Window is w, rounded up to whole seconds when written. 0 means
	// unknown (a named policy seen from the client): RateLimit-Policy and
	// the ";w=" of X-RateLimit-Limit are then left out.
	Window time.Duration
	// DenyAll marks a rule that denies every request (Quota is then 0).
	DenyAll bool
	// WarnAt is the warning threshold in units of Quota: a request that
	// leaves at least this many used gets RateLimit-Warning (State.Warning
	// says it did). 0 means none.
	WarnAt int64
}

// Of is the policy of limit l under name: a bucket's (algorithms.Facts
// Bucket: a queue drains as a bucket refills) or a window's.
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

// Bucket is the policy of a bucket of requests per period with the given
// burst (0 means requests): q is the burst and w the time the bucket
// takes to refill it (see the package doc).
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
	// Warning says the allowed request reached the limit's warning
	// threshold (Limit.WarnAt): RateLimit-Warning is written. Ignored
	// when Denied or when the limit has no threshold.
	Warning bool
}

// MoreRestrictive reports whether the headers of an answer that covers
// several decisions (the checks of a batch) should describe a rather than
// b: a deny beats an allow, a longer wait beats a shorter one (a negative
// wait, never, is the longest), fewer remaining beats more. On equals it
// is false, so the first of equals is described.
func MoreRestrictive(a, b State) bool {
	switch {
	case a.Denied != b.Denied:
		return a.Denied
	case a.Denied && a.RetryAfter != b.RetryAfter:
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

// LowerName is the field's name in lower case, as HTTP/2 and Envoy's
// response_headers_to_add write it.
func (f Field) LowerName() string {
	switch f.Name {
	case PolicyName:
		return "ratelimit-policy"
	case RateLimitName:
		return "ratelimit"
	case XLimitName:
		return "x-ratelimit-limit"
	case XRemainingName:
		return "x-ratelimit-remaining"
	case XResetName:
		return "x-ratelimit-reset"
	case RetryAfterName:
		return "retry-after"
	case DegradedName:
		return "x-ratelimit-degraded"
	case WarningName:
		return "ratelimit-warning"
	}
	return strings.ToLower(f.Name)
}

// Append appends to dst the fields describing s under l: RateLimit-Policy
// (when l.Window is known), RateLimit, the X-RateLimit-* fields, when
// s.Denied, Retry-After, and when s.Warning, RateLimit-Warning. A caller that writes the fields of one limit
// often should Prepare it once and use Policy.Append.
func Append(dst []Field, l Limit, s State) []Field {
	p := Prepare(l)
	return p.Append(dst, s)
}

// Policy is a Limit with the header values that do not depend on a
// request built once: RateLimit-Policy, X-RateLimit-Limit and the head of
// RateLimit. It is immutable, so one Policy may serve every request of a
// limit concurrently.
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

// Limit is the limit p was prepared from.
func (p *Policy) Limit() Limit { return p.limit }

// WarningMember is p's member of RateLimit-Warning, `"name";at=800`, or ""
// when the limit has no warning threshold. An answer covering several
// limits lists the members of those past their threshold, joined by ", "
// (AppendWarning).
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

// Append appends to dst the fields describing s under p's limit, as the
// package's Append does. The values that depend on s share one string, so
// it allocates once (and not at all for dst when dst has room).
func (p *Policy) Append(dst []Field, s State) []Field {
	// RateLimit's value `"name";r=R;t=T`, with Retry-After's value after
	// it: X-RateLimit-Remaining, X-RateLimit-Reset and Retry-After are
	// slices of the same string.
	var buf [96]byte
	b := append(buf[:0], p.head...)
	rStart := len(b)
	if p.limit.DenyAll {
		b = append(b, '0')
	} else {
		b = strconv.AppendInt(b, max(s.Remaining, 0), 10)
	}
	rEnd := len(b)
	b = append(b, ";t="...)
	tStart := len(b)
	if p.limit.DenyAll {
		b = strconv.AppendInt(b, NeverSeconds, 10)
	} else {
		b = strconv.AppendInt(b, Seconds(s.ResetAfter), 10)
	}
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
// decide: X-RateLimit-Degraded: true and, when denied (a limit that fails
// closed, or a replica's local share), Retry-After of retryAfter (at least
// a second; NeverSeconds for a negative one, which no path answers
// today: a cost above the local share waits for its period's end). Nothing about the quota is known, so nothing about it is
// written.
func AppendDegraded(dst []Field, denied bool, retryAfter time.Duration) []Field {
	dst = append(dst, Field{DegradedName, "true"})
	if denied {
		dst = append(dst, Field{RetryAfterName, strconv.FormatInt(RetryAfterSeconds(Limit{}, retryAfter), 10)})
	}
	return dst
}

// RetryAfterSeconds is the Retry-After of a request that l denied with
// the wait retryAfter: NeverSeconds for a deny-all rule or a negative
// (never) wait, else the wait rounded up, and at least 1: a denied client
// is never told to retry at once.
func RetryAfterSeconds(l Limit, retryAfter time.Duration) int64 {
	if l.DenyAll || retryAfter < 0 {
		return NeverSeconds
	}
	return max(Seconds(retryAfter), 1)
}

// Seconds is d in whole seconds, rounded up (1ms and 1s are 1, 1001ms is
// 2); 0 for d ≤ 0. It is the one rounding of every time floodgate writes
// in whole seconds: these headers, and the gRPC metadata of the client's
// interceptors (client/grpclimit).
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

// String is s as a Structured Field String (RFC 9651, section 3.3.3):
// quoted, with '"' and '\' escaped. A String holds only printable ASCII,
// so every other byte, and '%' itself, is percent-encoded as %xx (lower
// case hex, as RFC 9651's Display Strings do): "café" is "caf%c3%a9".
func String(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return `"` + s + `"`
	}
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s) + 8)
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
