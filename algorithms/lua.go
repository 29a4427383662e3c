package algorithms

// The Lua twins. Each algorithm file in lua/ mirrors its Go function line
// by line (same integer arithmetic; Lua's doubles are exact below 2^53, the
// bound Validate enforces, and every division is corrected to Go's
// truncated quotient). lua/batch.lua is the driver Redis runs: one call
// decides N requests all or nothing, like one store.Store Decide call.
//
// State layout in Redis, one key per (algorithm, key):
//
//	token_bucket        string  pack(A = tokens × scale, B = last refill ms, C = scale)
//	sliding_window      string  pack(A = window start ms, B = count in it, C = count in the one before)
//	fixed_window        string  pack(A = window start ms, B = count, C = 0)
//	sliding_window_log  string  header(format, head, floor) + a ring of unit times, 6 bytes a unit
//
// pack is one header byte (len(A) × 8 + len(C)) followed by A, C and B as
// little-endian two's complement integers in the fewest bytes each needs
// (0 bytes for 0): a token bucket of 100 per minute is 12 bytes, and its
// key (e.g. "fg:tb:{user:12345}") 88 bytes of Redis 7.0's MEMORY USAGE.
// The sliding window log's string (lua/sliding_window_log.lua) is a
// 19-byte header and one 6-byte slot per unit of its ring, which holds at
// most Requests slots: at most 60,019 bytes at MaxLogRequests (a 64 KiB
// allocation, about 65 KB of MEMORY USAGE). A decision reads O(log n)
// slots with GETRANGE and writes the slots it changes with SETRANGE; only
// growing or shrinking the ring (amortised O(1) a unit) rewrites it whole.
// Every write sets a TTL (the decision's TTL, in ms); a state whose TTL is
// 0 equals no state and is deleted instead.

import (
	_ "embed"
	"errors"
	"fmt"
)

var (
	//go:embed lua/lib.lua
	luaLib string
	//go:embed lua/token_bucket.lua
	luaTokenBucket string
	//go:embed lua/sliding_window.lua
	luaSlidingWindow string
	//go:embed lua/sliding_window_log.lua
	luaSlidingWindowLog string
	//go:embed lua/fixed_window.lua
	luaFixedWindow string
	//go:embed lua/batch.lua
	luaBatch string
)

// BatchScript returns the source of the Lua script that decides a batch of
// requests atomically in Redis: lua/lib.lua, the four algorithm twins and
// the lua/batch.lua driver, joined. Its header (lua/batch.lua) documents
// KEYS, ARGV and the reply; build ARGV with BatchArgs and
// AppendBatchRequest and read the reply with DecodeBatchReply.
//
// Every key of one call must hash to the same Redis Cluster slot. The
// script reads Redis' TIME unless the call passes an explicit now.
func BatchScript() string {
	return luaLib + luaTokenBucket + luaSlidingWindow + luaSlidingWindowLog + luaFixedWindow + luaBatch
}

// BatchReplyWidth is the number of integers the batch script answers per
// request: allowed, limit, remaining, retry_after_ms, reset_after_ms, ttl_ms.
const BatchReplyWidth = 6

// batchRequestWidth is the number of ARGV values per request.
const batchRequestWidth = 6

// BatchHeader is what a batch script call needs besides its requests.
type BatchHeader struct {
	// NowMs is the time of the decisions in Unix milliseconds; a negative
	// NowMs makes the script use Redis' own clock (TIME).
	NowMs int64
	// KeepMs is added to every TTL the script writes: 0 in production;
	// tests whose clock does not follow the wall clock pass a large value,
	// so that Redis does not expire keys their simulated time still needs.
	KeepMs int64
	// Probe makes the script decide without writing anything, even when
	// every request fits.
	Probe bool
}

// BatchArgs starts the ARGV of a batch script call that will hold n
// requests; append each request with AppendBatchRequest.
func BatchArgs(h BatchHeader, n int) []any {
	args := make([]any, 0, 3+batchRequestWidth*n)
	write := int64(1)
	if h.Probe {
		write = 0
	}
	return append(args, max(h.NowMs, -1), max(h.KeepMs, 0), write)
}

// AppendBatchRequest appends the ARGV of one request (cost charged against
// l; dryRun decides without writing) to args and returns the extended
// slice. The request's state key goes in KEYS at the same position.
// l must be valid (Validate).
func AppendBatchRequest(args []any, l Limit, cost int64, dryRun bool) []any {
	dry := int64(0)
	if dryRun {
		dry = 1
	}
	return append(args, int64(l.Algorithm), l.Requests, l.PeriodMs(), l.Burst, cost, dry)
}

// MarkBatchGroupStart makes the request last appended to args (by
// AppendBatchRequest) the first of a new group: the requests from it up to
// the next mark are decided all or nothing on their own, after the groups
// before them, as if they were a separate call. One script call can so
// carry several independent Decide calls whose keys share a slot.
func MarkBatchGroupStart(args []any) []any {
	if n := len(args); n > 3 {
		if flags, ok := args[n-1].(int64); ok {
			args[n-1] = flags | 2
		}
	}
	return args
}

// ErrBatchReply is wrapped by DecodeBatchReply's errors: the script
// answered something it never answers.
var ErrBatchReply = errors.New("malformed batch script reply")

// DecodeBatchReply reads the batch script's reply into out, one decision
// per request, in request order. It checks every element and returns an
// error wrapping ErrBatchReply instead of panicking on a reply of the
// wrong shape.
func DecodeBatchReply(reply any, out []Decision) error {
	vals, ok := reply.([]any)
	if !ok {
		return fmt.Errorf("%w: got %T, want an array", ErrBatchReply, reply)
	}
	if len(vals) != BatchReplyWidth*len(out) {
		return fmt.Errorf("%w: %d integers for %d requests, want %d", ErrBatchReply, len(vals), len(out), BatchReplyWidth*len(out))
	}
	var f [BatchReplyWidth]int64
	for i := range out {
		for j := range f {
			v, ok := vals[BatchReplyWidth*i+j].(int64)
			if !ok {
				return fmt.Errorf("%w: request %d field %d is %T, want an integer", ErrBatchReply, i, j, vals[BatchReplyWidth*i+j])
			}
			f[j] = v
		}
		allowed, limit, remaining, retryMs, resetMs, ttlMs := f[0], f[1], f[2], f[3], f[4], f[5]
		if allowed != 0 && allowed != 1 || limit <= 0 || remaining < 0 || retryMs < -1 || resetMs < 0 || ttlMs < 0 {
			return fmt.Errorf("%w: request %d: %v out of range", ErrBatchReply, i, f)
		}
		d := Decision{
			Allowed:    allowed == 1,
			Limit:      limit,
			Remaining:  remaining,
			RetryAfter: ms(retryMs),
			ResetAfter: ms(resetMs),
			TTL:        ms(ttlMs),
		}
		if retryMs == -1 {
			d.RetryAfter = Never
		}
		out[i] = d
	}
	return nil
}
