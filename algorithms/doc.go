// Package algorithms is floodgate's rate-limit math: five counting
// algorithms as pure functions. It needs no Redis: their Lua twins live
// with the Redis store (store/redisstore/lua).
//
// Most callers want [Decide]:
//
//	next, d := algorithms.Decide(limit, state, now, cost)
//
// It charges cost against limit for one key whose stored state is state,
// at time now, and returns the key's new state with a [Decision]. Nothing
// here reads a clock, does I/O, logs or keeps metrics; the caller (a store)
// reads the clock once, keeps the state, and writes next back. The zero
// [State] is a key never seen, i.e. a full limit.
//
// The whole surface is five calls: [Decide] (a time.Time, the plain
// decision), [DecideAt] (a [Request]: time in ms, cost, [Mode], calendar
// [Bounds]), [Apply] (DecideAt in place, for a caller that owns the state),
// [Peek] (the decision only, nothing written) and [Settle] (charge the
// difference between actual and reserved usage). [Limit.Validate] is the
// one check of a limit; [Algorithm.Facts] tells what an algorithm takes
// and how it answers, from the one table every layer of floodgate reads
// (table.go).
//
// The API follows floodgate's releases: v0, no compatibility promise yet.
//
// # Units
//
// Time is Unix milliseconds ([Request.NowMs] is an int64, the unit the
// Lua twins use; [Decide] converts a time.Time). A [Limit] is Requests per
// Period, Period a whole number of milliseconds. Costs are whole units
// (usually requests). Every duration in a Decision is a whole number of
// milliseconds.
//
// # Costs
//
// All five algorithms answer Allowed only if the whole cost fits, and a deny
// charges nothing: it returns the very state it was given, so it need not be
// written. Cost 0 is a peek: always allowed, the state is returned as is,
// and the decision reports Remaining, ResetAfter and TTL. A negative cost is
// a refund: units are given back (never above the capacity) and the
// decision is allowed. A cost above [Limit.Capacity] can never be admitted:
// the decision is a deny with RetryAfter == [Never], so that a client is
// told to stop rather than loop forever. Otherwise RetryAfter is exact: it
// is the shortest wait after which the same cost is admitted if nothing
// else is spent meanwhile (waiting 1ms less still denies), and Remaining is
// exact: Remaining more units can be spent at the same instant, and not one
// more.
//
// ResetAfter is the wait until a peek shows Remaining == Capacity (0 when it
// already does). TTL is how long the state must be kept: past it the state
// decides exactly like no state, so a store may drop it; TTL 0 means it may
// be dropped now. TTL equals ResetAfter except when the clock went back
// (below).
//
// # The algorithms
//
// W is the period in ms, r = Requests/W the rate.
//
// [TokenBucket]: a bucket of Burst tokens (Burst 0 means Requests), refilled
// at r: tokens = min(burst, tokens + elapsed·r); allowed iff tokens ≥ cost;
// Remaining = ⌊tokens after⌋; RetryAfter = ⌈(cost − tokens)/r⌉; ResetAfter =
// ⌈(burst − tokens after)/r⌉. It admits at most burst + r·t over any span t.
// State: A = tokens × scale, B = last refill (Unix ms), C = scale (below).
// When the limit changes, the whole tokens carry over, capped at the new
// burst. Three integers: a State value (48 bytes in Go, its empty Log
// header included), and a string of at most 25 packed bytes in Redis
// (store/redisstore/script.go).
//
// [SlidingWindow]: the sliding-window counter. Windows are aligned to
// ⌊now/W⌋; with curr counted in the current window, prev in the one before
// and e = now mod W, the estimate is curr + prev·(W − e)/W, and a cost is
// allowed iff estimate + cost ≤ Requests (strictly: a fractional estimate
// never lets the count overshoot). RetryAfter is the smallest
// wait after which that holds: while prev decays inside this window, or
// after the roll into the next one, where curr becomes prev and decays in
// turn — not "until the window ends". It stops the double burst at a window
// edge: ten requests just before the edge of a 10-per-2s window still weigh
// 9.95 ten milliseconds after it. State: A = window start (Unix ms), B = curr,
// C = prev; three integers, constant whatever the limit.
//
// [SlidingWindowLog]: exact. A cost is allowed iff the units admitted in
// (now − W, now] plus cost fit in Requests, and RetryAfter is the wait
// until enough of the oldest units have left the window. Refunds give back
// the newest units first. State: a ring of the times of the last admitted
// units, one slot a unit, sorted oldest to newest (Log; A its head, B a
// floor below which slots are gone, C how many slots from the head are
// gone; slidinglog.go). Because it is sorted, a decision is a search from
// the oldest live unit (O(log n), O(1) for a key in steady use) and one
// read for RetryAfter, and an admit of cost c overwrites the c oldest
// slots; the ring grows by doubling and shrinks when four times too large,
// never beyond Requests slots, hence the cap [MaxLogRequests]: at most 80
// KB in Go (8 bytes a slot) and 60 KB in Redis (6 bytes a slot, one string
// read with GETRANGE and written with SETRANGE; store/redisstore/script.go). Decide leaves the
// ring it was given intact, so an admit copies it (O(Requests)): States
// are values a caller may keep, fork or read from several goroutines.
// [Apply] is for a caller that owns the state, such as a store: it
// writes only the slots it changes, and [Undo] takes them back. When
// Requests changes under a key, its ring keeps every live unit: the
// decision is the one the log of all units would give.
//
// [FixedWindow]: windows aligned to ⌊now/W⌋ each admit Requests; allowed iff
// count + cost ≤ Requests; RetryAfter = until the window ends (a debt,
// see Debt, ends with it too: every window starts afresh). Burst-prone:
// Requests just before a window edge and Requests just after all pass, twice
// the limit within milliseconds. State: A = window start (Unix ms), B = count; two
// integers.
//
// # Calendar periods
//
// A [Limit] with a [Calendar] (Day, Week from Monday, Month, Year) and a
// Location counts the fixed window or the sliding window per local
// calendar period instead of per Period from the epoch: 10,000 per month
// resetting at midnight on the 1st in Asia/Jakarta. [Calendar.Bounds]
// computes the boundaries from the zone database (months of 28–31 days,
// days of 23 and 25 hours when daylight saving starts and ends), and
// [DecideAt] decides on given boundaries ([Request.Bounds]), so that the Redis store can
// compute them from floodgate's clock and let the script pick the period
// of Redis' clock. W is then the current period's length, W′ the next
// one's: the fixed window's RetryAfter and ResetAfter end at the local
// boundary; the sliding window's estimate is curr + prev·(W − e)/W,
// integer sums multiplied by W, and after the roll by W′ (a month of 31
// days may follow one of 28; slidingDecide has the algebra). A state whose
// window start is no boundary of the period decided counts as empty (the
// limit or the zone changed). Validate bounds Requests × [Calendar.MaxLength]
// for the sliding window.
//
// # Debt
//
// [DecideAt] in [Debt] mode charges usage that already happened (an LLM
// call's tokens, known when it ends): a positive cost is recorded even when
// it does not fit, so the key goes into debt, and later checks are denied
// until the limit's rate has repaid it, RetryAfter exact as always. A token
// bucket's tokens go below zero; a window's count goes past Requests. A
// fixed window's debt ends with its window: the next window starts
// afresh, as a calendar period does (a window means what it says). The
// sliding window carries the part above Requests into the next window
// (Requests repaid a window: at Requests + d it starts the next one at
// d, the window before keeping at most Requests). A key owes at most one capacity beyond empty: a token
// bucket holds at least −Burst tokens, a window at most 2 × Requests (also
// when the limit was lowered under a key), which keeps every integer below
// 3 × [MaxScaled] and every wait below 3 × the longest wait (2^42 ms); what a charge cannot
// record is reported in [Decision.Unrecorded]. The sliding window log holds
// one slot a unit and at most Requests: it records what its free slots
// hold and reports the rest. [Settle] is the settlement of a reservation
// (actual − reserved: debt, or a refund); the Debt of any decision in
// Debt mode is what the key owes after it.
//
// # Which to choose
//
//   - token_bucket for general APIs: a sustained rate with a burst, often
//     10–20× the per-second rate, so that clients may be bursty without
//     exceeding their rate over time (partner-API tiers).
//   - sliding_window for login, OTP and financial actions: no double burst
//     at window edges, constant memory, exact RetryAfter.
//   - sliding_window_log when exactness matters and limits are small (at
//     most [MaxLogRequests]): it never admits more than Requests in any
//     window of length W, at a memory cost that grows with the admitted
//     requests.
//   - fixed_window only for compatibility with envoyproxy/ratelimit
//     configs, whose semantics it reproduces, burst at the edges included,
//     and for calendar quotas (a Calendar): so many per local month.
//   - leaky_bucket when the caller can wait: calls to a partner API that
//     allows N a second, spaced exactly, from many workers and replicas.
//
// # Integer scaling and bounds
//
// All arithmetic is in int64 and exact; nothing is rounded but the final
// ⌈⌉ and ⌊⌋ above. The token bucket reduces Requests/W to lowest terms,
// perMs/scale with g = gcd(Requests, W), perMs = Requests/g and scale = W/g,
// and counts tokens in units of 1/scale token, so each millisecond adds
// exactly perMs units (golang.org/x/time/rate's float tokens cost it
// several precision bugs). The window algorithms multiply their sums by W.
// The Lua twins run the same arithmetic on Lua numbers, doubles that hold
// integers exactly only below 2^53, so [Limit.Validate] keeps every
// intermediate value below that with room to spare: Requests × W, and for
// the token bucket Burst × scale, must be at most [MaxScaled] (2^50); the
// sliding window log holds at most [MaxLogRequests]; and no wait may exceed
// the longest wait (2^42 ms) (about 139 years: a period, two for the sliding window, or an
// empty bucket's refill), so that every Duration fits a time.Duration even
// after the clock went back by as much again. now must be a Unix time in
// [0, 2^53) ms.
//
// # Time going backwards
//
// A now earlier than the state's newest time (the token bucket's last
// refill, the stored window, the log's newest unit; a leaky bucket's queue
// end simply stays ahead) is treated as that time: tokens do not refill,
// the stored window stays current, and a new unit is logged at the newest
// unit's time. Nothing is ever
// admitted that would not have been admitted at the newest time. Every
// duration in the Decision is measured from the caller's now, so it
// includes the lag: RetryAfter stays exact on the caller's clock, and the
// TTL keeps the state until the clock has caught up (a full bucket or an
// empty window ahead of now still decides differently from no state).
//
// # Lua twins
//
// store/redisstore/lua/*.lua mirror the Go functions line by line and
// are embedded in the binary. Where a Go function takes its inputs grouped
// in a small struct (the moment, cost and mode; the window decided and
// its counts), its Lua twin takes the same fields as positional arguments
// in the struct's order, the mode as its debt and nowait flags: a Lua
// table would cost an allocation a call, a Go struct passed by value
// costs none. store/redisstore/script.go describes the Redis key layout
// and the scripts. A change to the arithmetic here must be made there too,
// or Redis and the memory store will disagree: the differential test
// there (TestLuaMatchesGo) runs both side by side.
//
// # Embedding
//
// A Go service can limit in process with nothing but this package, the way
// it would use golang.org/x/time/rate: keep a State per key and call Decide
// under a lock (Example in example_test.go).
package algorithms
