package algorithms

// Request is one decision's inputs besides the limit and the state: when,
// how much, and how.
type Request struct {
	// NowMs is the time of the decision in Unix milliseconds, the unit the
	// Lua twins use. It may go back: a now before the state's newest time
	// is treated as that time.
	NowMs int64
	// Cost is what the request spends: > 0 spends, 0 only looks, < 0 gives
	// units back (a refund, never above the capacity).
	Cost int64
	// Mode changes how the request is decided (Debt, NoWait); 0 is the
	// plain decision.
	Mode Mode
	// Bounds are a calendar limit's period boundaries around NowMs; the
	// zero value computes them from the limit's Calendar and Location. A
	// store that decides at another clock than the one that computed the
	// boundaries (Redis' TIME) passes them, so both sides agree.
	Bounds Bounds
}

// ask is a Request without its Bounds: the moment, the cost and the mode
// that the algorithms' internals take, passed in registers.
type ask struct {
	now  int64 // Unix ms
	cost int64
	mode Mode
}

// ask is r without its Bounds.
func (r *Request) ask() ask { return ask{now: r.NowMs, cost: r.Cost, mode: r.Mode} }

// plain reports whether r decides l as no mode would, on boundaries of
// its own: no Debt, no NoWait on an algorithm that waits (Facts.Waits),
// no calendar Bounds given.
func (r *Request) plain(l Limit) bool {
	switch {
	case r.Mode&Debt != 0, l.Calendar != NoCalendar && r.Bounds != (Bounds{}):
		return false
	}
	return r.Mode&NoWait == 0 || !l.Algorithm.Facts().Waits
}

// debt reports whether a is decided in Debt mode.
func (a ask) debt() bool { return a.mode&Debt != 0 }

// DecideAt is Decide for a Request: the key's new state and the decision.
// The returned state of a deny, or of cost 0, is equivalent to s and need
// not be written. l must be valid (Validate).
func DecideAt(l Limit, s State, r Request) (State, Decision) {
	if l.Calendar != NoCalendar && r.Bounds != (Bounds{}) {
		return decideCalendar(l, s, r.Bounds, r.ask())
	}
	return decideMode(l, s, r.ask())
}

// Apply is DecideAt for a caller that owns the state, such as a store: it
// changes *s in place. A log's ring (Facts.Log) is written in place and
// the overwritten slots are recorded in u (nil records nothing), so that a
// caller deciding several requests all or nothing can take an admitted
// charge back with u.Revert; in Debt mode, or on a calendar limit with
// Bounds, *s is replaced by a new State and u records nothing.
func Apply(l Limit, s *State, r Request, u *Undo) Decision {
	if !r.plain(l) {
		next, d := DecideAt(l, *s, r)
		*s = next
		return d
	}
	return applyPlain(l, s, r.ask(), u)
}

// Peek is the decision DecideAt would make, with nothing written or copied:
// a dry run, or a request that must not charge.
func Peek(l Limit, s State, r Request) Decision {
	if !r.plain(l) {
		_, d := DecideAt(l, s, r)
		return d
	}
	return peekPlain(l, s, r.NowMs, r.Cost)
}
