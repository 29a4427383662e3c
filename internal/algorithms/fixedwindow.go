package algorithms

// decideFixedWindow counts in windows aligned to the Unix epoch: window
// ⌊now / Period⌋ admits Requests. Two full windows can pass back to back
// across an edge; it exists for envoyproxy/ratelimit compatibility.
//
// The state holds the window's start in Unix ms, not its index: a start
// that is not a multiple of the period comes from another period (the
// limit was reconfigured) and counts as an empty window, where an index
// from another period would read as a window far in the future.
//
// Mirrored by store/redisstore/lua/fixed_window.lua.
func decideFixedWindow(l Limit, s State, now, cost int64) (State, Decision) {
	w := l.PeriodMs()
	start := now - now%w
	count := int64(0)
	switch {
	case s.A%w != 0: // a window of another period: the limit changed
	case s.A == start:
		count = s.B
	case s.A > start: // the clock went back: stay in the stored window
		start, count = s.A, s.B
	}
	return fixedDecide(l, start, start+w, count, s, now, cost)
}

// fixedDecide decides cost in the window [start, end) holding count, the
// part a fixed period and a calendar period (DecideCalendar) share; s is
// the state as stored, returned unchanged by a deny or a peek.
func fixedDecide(l Limit, start, end, count int64, s State, now, cost int64) (State, Decision) {
	stop := end - now
	d := Decision{Allowed: true, Limit: l.Requests}
	switch {
	case cost > 0 && count+cost > l.Requests:
		d.Allowed = false
		d.RetryAfter = ms(stop)
	case cost > 0:
		count += cost
	case cost < 0:
		count = max(0, count+cost)
	}
	d.Remaining = max(0, l.Requests-count)
	if count > 0 {
		d.ResetAfter = ms(stop)
	}
	d.TTL = d.ResetAfter
	if d.TTL == 0 && start > now {
		// The clock went back: an empty window ahead of now still decides
		// differently from no state until the clock reaches it.
		d.TTL = ms(start - now)
	}
	if !d.Allowed || cost == 0 {
		return s, d
	}
	return State{A: start, B: count}, d
}
