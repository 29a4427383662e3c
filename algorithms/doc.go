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
// W is the period in ms, r = Requests/W the rate. Every State but the
// log's is three integers (48 bytes in Go, its empty Log included); the
// Redis store's layouts are in store/redisstore/script.go.
//
// [TokenBucket]: a bucket of Burst tokens (Burst 0 means Requests), refilled
// at r: tokens = min(burst, tokens + elapsed·r); allowed iff tokens ≥ cost;
// Remaining = ⌊tokens after⌋; RetryAfter = ⌈(cost − tokens)/r⌉; ResetAfter =
// ⌈(burst − tokens after)/r⌉. It admits at most burst + r·t over any span t.
// State: the moment the bucket is full again (a theoretical arrival time),
// A whole Unix ms and B ticks of a ms (tokenbucket.go). When the limit
// changes, the time until the bucket is full carries over.
//
// [SlidingWindow]: the sliding-window counter. Windows are aligned to
// ⌊now/W⌋; with curr counted in the current window, prev in the one before
// and e = now mod W, the estimate is curr + prev·(W − e)/W, and a cost is
// allowed iff estimate + cost ≤ Requests (strictly: a fractional estimate
// never lets the count overshoot). RetryAfter is the smallest wait after
// which that holds: while prev decays inside this window, or after the
// roll into the next one, where curr becomes prev and decays in turn —
// not "until the window ends". It stops the double burst at a window
// edge: ten requests just before the edge of a 10-per-2s window still weigh
// 9.95 ten milliseconds after it. State: A = window start (Unix ms), B = curr,
// C = prev.
//
// [SlidingWindowLog]: exact. A cost is allowed iff the units admitted in
// (now − W, now] plus cost fit in Requests, and RetryAfter is the wait
// until enough of the oldest units have left the window. Refunds give back
// the newest units first. State: a ring of the times of the last admitted
// units, one slot a unit, sorted oldest to newest (slidinglog.go), so a
// decision is a search from the oldest live unit (O(log n), O(1) for a
// key in steady use) and an admit of cost c overwrites the c oldest slots.
// The ring grows by doubling and shrinks when four times too large, never
// beyond Requests slots, hence the cap [MaxLogRequests] (8 bytes a slot in
// Go). Decide leaves the ring it was given intact, so an admit copies it
// (O(Requests)): States are values a caller may keep, fork or read from
// several goroutines. [Apply] is for a caller that owns the state, such as
// a store: it writes only the slots it changes, and [Undo] takes them
// back. When Requests changes under a key, its ring keeps every live
// unit: the decision is the one the log of all units would give.
//
// [FixedWindow]: windows aligned to ⌊now/W⌋ each admit Requests; allowed iff
// count + cost ≤ Requests; RetryAfter = until the window ends. Burst-prone:
// Requests just before a window edge and Requests just after all pass,
// twice the limit within milliseconds. State: A = window end (Unix ms),
// B = count: windows of two periods that end together share the count.
//
// [LeakyBucket]: a queue of Burst slots (0 means Requests) that starts one
// request every W/Requests ms, exactly on average; an admitted cost takes
// the next free slots and its [Decision.Wait] is the time until the first
// of them. It denies only when the queue is full, or, with [NoWait], when
// the request would have to wait. State: the queue's end, B whole Unix ms
// and A units of a ms, C the unit (leakybucket.go).
//
// # Calendar periods
//
// A [Limit] with a [Calendar] (Day, Week from Monday, Month, Year) and a
// Location counts the fixed window or the sliding window per local
// calendar period instead of per Period from the epoch: 10,000 per month
// resetting at midnight on the 1st in Asia/Jakarta. [Calendar.Bounds]
// computes the boundaries from the zone database (months of 28–31 days,
// days of 23 and 25 hours when daylight saving starts and ends), and
// [DecideAt] decides on given boundaries ([Request.Bounds]), so that the
// Redis store can compute them from floodgate's clock and let the script
// pick the period of Redis' clock. The fixed window's RetryAfter and
// ResetAfter end at the local boundary; the sliding window weighs the
// previous period by the fraction of the current one still to come, and
// after the roll by the next one's length (slidingDecide). A state whose
// window (the fixed window's end, the sliding window's start) is not the
// period decided counts as empty (the limit or the zone changed).
//
// # Debt
//
// [DecideAt] in [Debt] mode charges usage that already happened: a
// positive cost is recorded even when it does not fit, and later checks
// are denied until the limit's rate has repaid it, RetryAfter exact as
// always. A key owes at most one capacity; what a charge cannot record is
// reported in [Decision.Unrecorded]. [Settle] is the settlement of a
// reservation (actual − reserved: debt, or a refund).
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
// ⌈⌉ and ⌊⌋ above. The buckets reduce Requests/W to lowest terms, perMs/scale
// with g = gcd(Requests, W), perMs = Requests/g and scale = W/g, and count
// in units of 1/scale token (or queue slot), so each millisecond adds
// exactly perMs units. The window algorithms multiply their sums by W.
// The Lua twins run the same arithmetic on Lua numbers, doubles that hold
// integers exactly only below 2^53, so [Limit.Validate] keeps every
// intermediate value below that with room to spare: Requests, Requests ×
// W for the sliding window (W the longest calendar period for a calendar
// limit), and a bucket's Burst × scale must be at most [MaxScaled]
// (2^50); the sliding window log holds at most [MaxLogRequests]; and no
// wait may exceed the longest wait (2^42 ms, about 139 years: a period,
// two for the sliding window, or an empty bucket's refill), so that every
// Duration fits a time.Duration even after the clock went back by as much
// again. now must be a Unix time in [0, 2^53) ms.
//
// # Time going backwards
//
// A now earlier than the state's newest time (the stored window, the
// log's newest unit; a bucket's arrival time or a queue's end simply
// stays ahead) is treated as that time: the bucket does not refill, the
// stored window stays current, and a new unit is logged at the newest
// unit's time. Nothing is ever admitted that would not have been admitted
// at the newest time. Every duration in the Decision is measured from the
// caller's now, so it includes the lag: RetryAfter stays exact on the
// caller's clock, and the TTL keeps the state until the clock has caught
// up (a full bucket or an empty window ahead of now still decides
// differently from no state).
//
// # Lua twins
//
// store/redisstore/lua/*.lua mirror the Go functions line by line; where
// a Go function takes a small struct (the moment, cost and mode; the
// window decided and its counts), its twin takes the fields as
// positional arguments in the struct's order. A change to the arithmetic
// here must be made there too: the differential test there
// (TestLuaMatchesGo) runs both side by side.
//
// # Embedding
//
// A Go service can limit in process with nothing but this package, the way
// it would use golang.org/x/time/rate: keep a State per key and call Decide
// under a lock (Example in example_test.go).
package algorithms
