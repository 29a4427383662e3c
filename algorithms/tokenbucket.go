package algorithms

// tokenScale reduces the rate requests/periodMs to lowest terms: a token
// bucket gains perMs scaled units each millisecond, and one token is scale
// units. Counting in scaled units keeps refills exact integers.
func tokenScale(requests, periodMs int64) (perMs, scale int64) {
	g := gcd(requests, periodMs)
	return requests / g, periodMs / g
}

// Scale is the token and leaky buckets' rate in lowest terms: perMs
// scaled units a millisecond, scale units a token (or a queue slot). A
// store that decides elsewhere (redisstore's Lua) takes them from here.
func (l Limit) Scale() (perMs, scale int64) {
	return tokenScale(l.Requests, l.PeriodMs())
}

// rate is a limit's rate as tokenScale reduces it: perMs scaled units
// gained a millisecond, scale units a token.
type rate struct{ perMs, scale int64 }

// tokensAt is the scaled tokens of s refilled up to now (below zero when
// the key is in debt).
func tokensAt(l Limit, s State, now int64) int64 {
	perMs, scale := tokenScale(l.Requests, l.PeriodMs())
	tokens, _ := refill(l, s, now, rate{perMs, scale})
	return tokens
}

// refill is the scaled tokens of s refilled up to now, and the time they
// stand at (now, or the last refill if the clock went back); r is
// tokenScale's for l.
func refill(l Limit, s State, now int64, r rate) (tokens, last int64) {
	perMs, scale := r.perMs, r.scale
	capacity := l.Capacity()
	full := capacity * scale
	tokens, last = s.A, s.B
	switch {
	case s.C == 0: // never seen: a full bucket
		tokens, last = full, now
	case s.C != scale: // the limit changed: keep the whole tokens (and debt)
		tokens = max(-capacity, min(s.A/s.C, capacity)) * scale
	}
	if now > last {
		if need := full - tokens; need <= 0 || now-last >= ceilDiv(need, perMs) {
			tokens = full
		} else {
			tokens += (now - last) * perMs
		}
		last = now
	}
	return min(tokens, full), last
}

// tokenBucket is the token bucket: a capacity of Burst tokens refilled
// at Requests per Period. Tokens are counted in scaled units (scale units a
// token, perMs units gained each millisecond), so refills never round.
//
// Mirrored by store/redisstore/lua/token_bucket.lua.
//
// tokenBucket decides a.cost at a.now; in Debt mode, a positive cost is
// charged even when it does not fit, down to -capacity tokens (Debt).
func tokenBucket(l Limit, s State, a ask) (State, Decision) {
	now, cost, debt := a.now, a.cost, a.debt()
	perMs, scale := tokenScale(l.Requests, l.PeriodMs())
	capacity := l.Capacity()
	full := capacity * scale
	tokens, last := refill(l, s, now, rate{perMs, scale})
	// When the clock went back, the bucket stands at last; every wait is
	// measured from now, so it includes the lag.
	lag := last - now

	d := Decision{Allowed: true, Limit: capacity}
	switch {
	case debt && cost > 0:
		// Whole units down to -capacity tokens (tokens >= -full holds).
		k := min(cost, (tokens+full)/scale)
		tokens -= k * scale
		d.Unrecorded = cost - k
	case cost > 0 && tokens < cost*scale:
		d.Allowed = false
		d.RetryAfter = ms(lag + ceilDiv(cost*scale-tokens, perMs))
	case cost > 0:
		tokens -= cost * scale
	case cost < 0:
		tokens = min(full, tokens-cost*scale)
	}
	d.Remaining = max(0, tokens/scale) // 0 while in debt
	d.TTL = ms(lag + ceilDiv(full-tokens, perMs))
	if tokens < full {
		d.ResetAfter = d.TTL
	}
	if !d.Allowed || cost == 0 {
		return s, d
	}
	return State{A: tokens, B: last, C: scale}, d
}

// tokenBucketDebt is how many tokens a bucket in state s owes at now:
// its whole tokens below zero, rounded up.
func tokenBucketDebt(l Limit, s State, now int64) int64 {
	t := tokensAt(l, s, now)
	if t >= 0 {
		return 0
	}
	_, scale := tokenScale(l.Requests, l.PeriodMs())
	return ceilDiv(-t, scale)
}
