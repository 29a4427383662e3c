package algorithms

// fixedCount is the count of the window now falls in and its start: s
// counts only when it is that window's (State.A its end). Each window
// has its own count (the Redis store keeps one counter a window, named
// by its end): a window starts afresh at its boundary, a count above
// Requests (a debt) is not carried into the windows after it, and a
// state of another window (a clock that went back or forth across a
// boundary, or a period that changed so the window ends elsewhere) is
// not this window's. Windows of different periods that end together
// share a count: the count of the shorter one is a lower bound of the
// traffic in the longer one.
func fixedCount(l Limit, s State, now int64) (count, start int64) {
	w := l.periodMs()
	start = now - now%w
	if s.A == start+w {
		count = s.B
	}
	// At most 2 × Requests (a debt of one capacity), also when the
	// limit was lowered.
	return min(count, 2*l.Requests), start
}

// fixedWindow counts in windows aligned to the Unix epoch: window
// ⌊now / Period⌋ admits Requests. Two full windows can pass back to back
// across an edge; it exists for envoyproxy/ratelimit compatibility.
//
// The state holds the window's end in Unix ms and its count; a state
// of any other window counts as an empty one (fixedCount).
//
// Mirrored by store/redisstore/lua/fixed_window.lua.
//
// fixedWindow decides a.cost at a.now; in Debt mode, a positive cost is
// charged even when it does not fit, up to 2 × Requests in the window
// (Debt), and the debt ends with the window: the next one starts afresh,
// as a calendar period does.
//
// A state of a window that ends later (the clock went back, or the
// period shrank) is that window's count, which this window's decision
// leaves alone where it can: its TTL lasts until that window's end, and
// a look or a refund here leaves it as it is. (A charge here replaces
// it: this State holds one window, where the Redis store keeps a counter
// for each.)
func fixedWindow(l Limit, s State, a ask) (State, Decision) {
	w := l.periodMs()
	count, start := fixedCount(l, s, a.now)
	next, d := fixedDecide(l, s, fixedSpan{start: start, end: start + w, count: count}, a)
	if s.A > start+w && s.B > 0 {
		d.TTL = max(d.TTL, ms(s.A-a.now))
		if next.B == 0 {
			return s, d
		}
	}
	return next, d
}

// fixedCalendar is the fixed window's decision in a calendar period
// (decideCalendar): each period counts on its own, as fixedCount's
// windows do, so a state counts only when it ends the period decided.
func fixedCalendar(l Limit, s State, b Bounds, a ask) (State, Decision) {
	i := b.period(a.now)
	count := int64(0)
	if s.A == b[i+1] {
		count = min(s.B, 2*l.Requests)
	}
	return fixedDecide(l, s, fixedSpan{start: b[i], end: b[i+1], count: count}, a)
}

// fixedSpan is the window a fixed-window decision is made in: [start,
// end), holding count. A debt is not carried past end: a window means
// what it says, and a quota's period, like a bill's, does not roll over.
type fixedSpan struct {
	start, end, count int64
}

// fixedDecide decides a.cost at a.now in the window w, the part a fixed
// period and a calendar period (decideCalendar) share; s is the state as
// stored, returned unchanged by a deny or a peek.
func fixedDecide(l Limit, s State, w fixedSpan, a ask) (State, Decision) {
	start, count := w.start, w.count
	now, cost, debt := a.now, a.cost, a.debt()
	stop := w.end - now
	d := Decision{Allowed: true, Limit: l.Requests}
	switch {
	case debt && cost > 0:
		k := max(0, min(cost, 2*l.Requests-count))
		count += k
		d.Unrecorded = cost - k
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
	if debt {
		d.Debt = max(0, count-l.Requests)
	}
	if !d.Allowed || cost == 0 {
		return s, d
	}
	return State{A: w.end, B: count}, d
}

// validateWindow is Validate's check of a fixed window's numbers: it
// counts requests, which Validate bounds, and takes nothing else.
func validateWindow(Limit) error { return nil }
