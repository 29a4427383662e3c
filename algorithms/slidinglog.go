package algorithms

// decideSlidingLog is the exact sliding window: a log of admitted costs, one
// entry per millisecond. A cost is admitted iff the costs logged in
// (now − W, now] plus cost fit in Requests. RetryAfter is the wait until
// enough of the oldest entries have left the window.
//
// Mirrored by lua/sliding_window_log.lua.
func decideSlidingLog(l Limit, s State, now, cost int64) (State, Decision) {
	w := l.PeriodMs()
	at := now
	if n := len(s.Log); n > 0 {
		at = max(at, s.Log[n-1].At) // the clock went back: decide at the newest entry
	}
	first := 0
	for first < len(s.Log) && s.Log[first].At <= at-w {
		first++
	}
	live := s.Log[first:]
	sum := int64(0)
	for _, e := range live {
		sum += e.N
	}

	d := Decision{Allowed: true, Limit: l.Requests}
	var next []LogEntry
	switch {
	case cost > 0 && sum+cost > l.Requests:
		d.Allowed = false
		need := sum + cost - l.Requests
		for _, e := range live {
			need -= e.N
			if need <= 0 {
				d.RetryAfter = ms(e.At + w - now)
				break
			}
		}
	case cost > 0:
		next = make([]LogEntry, len(live), len(live)+1)
		copy(next, live)
		if n := len(next); n > 0 && next[n-1].At == at {
			next[n-1].N += cost
		} else {
			next = append(next, LogEntry{At: at, N: cost})
		}
		sum += cost
	case cost < 0:
		next = make([]LogEntry, len(live))
		copy(next, live)
		for refund := -cost; refund > 0 && len(next) > 0; {
			n := len(next) - 1
			take := min(refund, next[n].N)
			next[n].N -= take
			refund -= take
			sum -= take
			if next[n].N == 0 {
				next = next[:n]
			}
		}
	default:
		next = live
	}
	d.Remaining = max(0, l.Requests-sum)
	if d.Allowed {
		if n := len(next); n > 0 {
			d.ResetAfter = ms(next[n-1].At + w - now)
		}
	} else if n := len(live); n > 0 {
		d.ResetAfter = ms(live[n-1].At + w - now)
	}
	d.TTL = d.ResetAfter
	if !d.Allowed || cost == 0 {
		return s, d
	}
	return State{Log: next}, d
}
