package algorithms

// Mode changes how one request is decided; the zero Mode is the plain
// decision. Modes are bits, so they combine.
type Mode uint8

// NoWait admits a leaky-bucket request only if it may start now (its Wait
// would be 0); a request that would have to queue is denied, with
// RetryAfter until the queue is empty. For a caller that cannot hold a
// request, such as Envoy's ShouldRateLimit. Every other algorithm ignores
// it (they never wait).
const NoWait Mode = 1 << 2

// DecideMode is DecideMs in mode m (see Mode).
func DecideMode(l Limit, s State, nowMs, cost int64, m Mode) (State, Decision) {
	if c := l.Capacity(); cost > c {
		d := peekOnly(l, s, nowMs, m)
		d.Allowed, d.RetryAfter, d.Wait = false, Never, 0
		return s, d
	} else if cost < -c {
		cost = -c
	}
	if l.Calendar != NoCalendar { // only the windows, which never wait
		return DecideCalendar(l, s, l.Calendar.Bounds(l.Location, nowMs), nowMs, cost)
	}
	switch l.Algorithm {
	case TokenBucket:
		return decideTokenBucket(l, s, nowMs, cost)
	case SlidingWindow:
		return decideSlidingWindow(l, s, nowMs, cost)
	case SlidingWindowLog:
		return decideSlidingLog(l, s, nowMs, cost)
	case FixedWindow:
		return decideFixedWindow(l, s, nowMs, cost)
	case LeakyBucket:
		return decideLeakyBucket(l, s, nowMs, cost, m)
	}
	return s, Decision{Limit: l.Capacity(), RetryAfter: Never}
}

func peekOnly(l Limit, s State, nowMs int64, m Mode) Decision {
	_, d := DecideMode(l, s, nowMs, 0, m)
	return d
}
