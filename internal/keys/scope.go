package keys

import (
	"strconv"

	"github.com/floodgate/floodgate/algorithms"
)

// PolicyScope is the store scope of a policy's count: its name, so a
// policy's count survives a reload that changes its numbers, while two
// policies on one key never share one.
func PolicyScope(name string) string { return "p" + name }

// IsInlineScope reports whether scope is an InlineScope (not a
// PolicyScope).
func IsInlineScope(scope string) bool { return len(scope) > 0 && scope[0] == 'i' }

// InlineScope is the store scope of an inline limit's count: its numbers,
// so two inline limits on one key never share a count. It is short (it
// lengthens every Redis key): "i100/1m", "i10/90s/50", or a calendar's
// "i10000/month@Asia/Jakarta".
func InlineScope(l algorithms.Limit) string {
	var buf [48]byte
	b := append(buf[:0], 'i')
	b = strconv.AppendInt(b, l.Requests, 10)
	b = append(b, '/')
	ms := l.Period.Milliseconds()
	switch {
	case l.Calendar != algorithms.NoCalendar:
		b = append(b, l.Calendar.String()...)
		b = append(b, '@')
		b = append(b, l.Location.String()...) // a nil Location is UTC
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
