package keys

import (
	"strconv"

	"github.com/floodgate/floodgate/algorithms"
)

// PolicyScope is the store scope of a policy's count: its name, so that a
// policy whose numbers change on a config reload keeps the key's count (a
// tier's limit raised or lowered applies to what was already spent), while
// two policies on one key (login and otp on a user) never share one.
func PolicyScope(name string) string { return "p" + name }

// IsInlineScope reports whether scope is an InlineScope (not a
// PolicyScope).
func IsInlineScope(scope string) bool { return len(scope) > 0 && scope[0] == 'i' }

// InlineScope is the store scope of an inline limit's count: its numbers
// (the algorithm is in the store key already), so that two inline limits
// on one key never share a count, whatever order callers interleave them.
// It is short, since it lengthens every Redis key of the limit: requests,
// the period in its largest whole unit, and the burst when set, e.g.
// "i100/1m" or "i10/90s/50". A calendar limit names its period and time
// zone instead, e.g. "i10000/month@Asia/Jakarta", so it never shares a
// count with a fixed period of the same numbers, nor with another zone.
func InlineScope(l algorithms.Limit) string {
	var buf [48]byte // room for "i" and the numbers: one allocation, the string
	b := append(buf[:0], 'i')
	b = strconv.AppendInt(b, l.Requests, 10)
	b = append(b, '/')
	ms := l.PeriodMs()
	switch {
	case l.Calendar != algorithms.NoCalendar:
		b = append(b, l.Calendar.String()...)
		b = append(b, '@')
		if l.Location == nil {
			b = append(b, "UTC"...)
		} else {
			b = append(b, l.Location.String()...)
		}
	case ms%3_600_000 == 0:
		b = append(strconv.AppendInt(b, ms/3_600_000, 10), 'h')
	case ms%60_000 == 0:
		b = append(strconv.AppendInt(b, ms/60_000, 10), 'm')
	case ms%1000 == 0:
		b = append(strconv.AppendInt(b, ms/1000, 10), 's')
	default:
		b = append(strconv.AppendInt(b, ms, 10), "ms"...)
	}
	if l.Burst > 0 {
		b = append(b, '/')
		b = strconv.AppendInt(b, l.Burst, 10)
	}
	return string(b)
}
