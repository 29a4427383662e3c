package redisstore

// The wire protocol of the library's functions: their Lua sources (lua/,
// embedded; lua/lib.lua describes ARGV and the reply), the arguments the
// Go sends and the reply it decodes. Each decision is computed once, by
// the script. State layout, one key per (algorithm, key):
//
//	token_bucket        '<i5I3i4': the arrival time's ms - epoch, its ticks and the key's expiry less it ('<i8i8' when out of range)
//	sliding_window      pack(A = window start, B = its count, C = the previous window's)
//	fixed_window        an integer count per window key (keys.go's windowKeyed)
//	leaky_bucket        pack(A = queue end's fraction of a ms × C, B = queue end, C = perMs)
//	sliding_window_log  a header and a ring of unit times, 6 bytes a unit
//
// pack is lua/lib.lua's three-integer codec; bench/RESULTS.md has the
// MEMORY USAGE of each. Every write sets a TTL (a token bucket's, a
// sliding window's and a leaky bucket's write keeps the one its state
// records when it covers the state); a state whose TTL is 0 equals no
// state and is deleted instead.

import (
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/algolua"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// luaLib is lua/lib.lua after the wire sizes (luaWire) and the
// algorithms' numbers (algolua.Constants), so the Lua reads the Go's.
var luaLib = luaWire() + algolua.Constants() + luaFile("lib")

// luaFile is lua/<name>.lua.
func luaFile(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	return string(b)
}

// luaSource is the Lua of the function library: lib.lua, the algorithms
// (each adds its function to lib.lua's ALG), then the drivers.
func luaSource() string {
	src := luaLib
	for _, f := range []string{"token_bucket", "sliding_window", "fixed_window", "leaky_bucket", "sliding_window_log", "decide", "settle", "demand", "forget"} {
		src += luaFile(f)
	}
	return src
}

// Sizes of the wire format (lua/lib.lua), defined here only: luaWire
// hands the request sizes to the Lua.
const (
	hdrLen     = 26 // form, now_ms, keep_ms, deadline_ms, write
	reqLen     = 33 // algorithm and flags, x, y, z, cost
	calLen     = 40 // a calendar request's boundaries (algorithms.Bounds), after reqLen
	replyLen   = 40 // a reply record: 4 × remaining + allowed, retry_after_ms, reset_after_ms, ttl_ms, wait_ms
	replyShort = 16 // the short record: 4 × remaining + allowed, -2 - 2 × reset_after_ms (also the TTL; no retry, no wait)
	replyWait  = 24 // the short record of a wait: 4 × remaining + allowed, -3 - 2 × reset_after_ms, wait_ms
)

// The flag bits of a request's first byte (8 * flags + algorithm; lua/lib.lua
// reads them). Their own numbers, not algorithms.Mode's: appendRequest
// maps each Mode bit to its flag.
const (
	flagDry      = 1 // decide as if charging, never write
	flagDebt     = 2 // algorithms.Debt
	flagNoWait   = 4 // algorithms.NoWait
	flagCalendar = 8 // a calendar limit: calLen bytes of boundaries follow
)

// luaWire is the Lua that defines the wire sizes lua/lib.lua uses,
// BAD_REPLY, the first field of a failed request's record (replyBad,
// then zeros), and TB_PAD_MIN (tbPadMin in ms).
func luaWire() string {
	return fmt.Sprintf("local HDR_LEN, REQ_LEN, CAL_LEN = %d, %d, %d\nlocal BAD_REPLY = %d\nlocal TB_PAD_MIN = %d\n", hdrLen, reqLen, calLen, replyBad, tbPadMin.Milliseconds())
}

// tbPadMin is the least a token bucket's key is kept beyond what its
// state needs when a write sets its TTL (lua/token_bucket.lua's pad): a
// key charged again within it is found live and its TTL kept (GET and
// SETRANGE), not expired and made again (SETRANGE and PEXPIRE, and
// Redis' deletion of the expired key), for a second's memory a key seen
// once.
const tbPadMin = time.Second

// replyBad is the allowed byte of a request whose key holds a malformed
// state (lua/lib.lua's BAD_REPLY): it and its group decided nothing.
const replyBad = 2

// maxWireCost bounds the costs sent: every capacity is at most
// algorithms.MaxScaled, so a cost beyond it decides like any other (a
// deny with RetryAfter Never, or a refund of the whole capacity), and the
// bound keeps the script's doubles exact.
const maxWireCost = 2 * algorithms.MaxScaled

// header is what a script call needs besides its requests.
type header struct {
	// nowMs is the time of the decisions in Unix ms; -1 makes the script
	// use Redis' own clock (TIME).
	nowMs int64
	// keepMs is added to every TTL the script writes (clientTimeKeep with
	// Config.ClientTime).
	keepMs int64
	// probe decides without writing anything.
	probe bool
	// calMs is floodgate's clock in Unix ms, whatever nowMs says: the
	// boundaries of calendar limits are computed for it (appendRequest),
	// and the script picks among them the period of its own now.
	calMs int64
	// deadlineMs is when the caller gives up, in Unix ms by Redis' clock
	// (deadline.go); a decide call Redis starts later writes nothing and
	// answers LATE. 0: none.
	deadlineMs int64
}

// appendHeader appends h's bytes (the binary form) to buf.
func appendHeader(buf []byte, h header) []byte {
	buf = append(buf, 'b')
	buf = binary.LittleEndian.AppendUint64(buf, uint64(max(h.nowMs, -1)))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(min(max(h.keepMs, 0), maxWireCost)))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(max(h.deadlineMs, 0)))
	if h.probe {
		return append(buf, 0)
	}
	return append(buf, 1)
}

// appendRequest appends one request's bytes (the binary form) to buf:
// cost charged against l (valid: Validate) in mode m (algorithms.Debt
// sets flagDebt, algorithms.NoWait flagNoWait), dry deciding without
// writing, for a call of header h. A calendar limit sets flagCalendar,
// sends its current period's length as period_ms, and appends the five
// boundaries around h.calMs (floodgate's clock, Unix ms; lua/lib.lua).
func appendRequest(buf []byte, l algorithms.Limit, cost int64, dry bool, m algorithms.Mode, h header) []byte {
	var flags byte
	if dry {
		flags |= flagDry
	}
	if m&algorithms.Debt != 0 {
		flags |= flagDebt
	}
	if m&algorithms.NoWait != 0 {
		flags |= flagNoWait
	}
	periodMs := l.Period.Milliseconds()
	var bounds algorithms.Bounds
	if l.Calendar != algorithms.NoCalendar {
		flags |= flagCalendar
		bounds = l.Calendar.Bounds(l.Location, h.calMs)
		periodMs = bounds[2] - bounds[1]
	}
	// The limit's numbers (lua/lib.lua): a bucket's rate in lowest terms
	// and capacity, so the script computes no gcd; the others' requests
	// and period.
	x, y, z := l.Requests, periodMs, l.Burst
	if l.Algorithm.Facts().Bucket {
		x, y = l.Scale()
		z = l.Capacity()
	}
	buf = append(buf, byte(l.Algorithm)&7|flags<<3)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(x))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(y))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(z))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(min(max(cost, -maxWireCost), maxWireCost)))
	if l.Calendar != algorithms.NoCalendar {
		for _, v := range bounds {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
		}
	}
	return buf
}

// errReply is wrapped by decodeReply's errors: an answer the script never
// gives.
var errReply = errors.New("malformed script reply")

// decodeReply reads a script reply (or one call's part of it) into out,
// one decision per request, each Limit the capacity caps gives for it. It
// checks every field, and a reply of the wrong shape is an error wrapping
// errReply, never a panic.
func decodeReply(reply any, out []algorithms.Decision, caps func(i int) int64) error {
	str, ok := reply.(string)
	if !ok {
		return fmt.Errorf("%w: got %T, want a string", errReply, reply)
	}
	off := 0
	for i := range out {
		n := recordLen(str[off:])
		if n == 0 {
			return fmt.Errorf("%w: %d bytes for %d requests", errReply, len(str), len(out))
		}
		b := str[off : off+n]
		off += n
		first := le64(b)
		if first == replyBad {
			return &stateError{index: i}
		}
		allowed, remaining := first&3, first>>2
		var retryMs, resetMs, ttlMs, waitMs int64
		if n != replyLen {
			v := -2 - le64(b[8:])
			resetMs, ttlMs = v>>1, v>>1
			if n == replyWait {
				waitMs = le64(b[16:])
			}
		} else {
			retryMs, resetMs, ttlMs, waitMs = le64(b[8:]), le64(b[16:]), le64(b[24:]), le64(b[32:])
		}
		if allowed > 1 || remaining < 0 || retryMs < -1 || resetMs < 0 || ttlMs < 0 || waitMs < 0 {
			return fmt.Errorf("%w: request %d: [%d %d %d %d %d %d] out of range", errReply, i, allowed, remaining, retryMs, resetMs, ttlMs, waitMs)
		}
		d := algorithms.Decision{
			Allowed:    allowed == 1,
			Limit:      caps(i),
			Remaining:  remaining,
			RetryAfter: time.Duration(retryMs) * time.Millisecond,
			ResetAfter: time.Duration(resetMs) * time.Millisecond,
			TTL:        time.Duration(ttlMs) * time.Millisecond,
			Wait:       time.Duration(waitMs) * time.Millisecond,
		}
		if retryMs == -1 {
			d.RetryAfter = algorithms.Never
		}
		out[i] = d
	}
	if off != len(str) {
		return fmt.Errorf("%w: %d bytes for %d requests, %d read", errReply, len(str), len(out), off)
	}
	return nil
}

// recordLen is the length of the reply record at the start of s (lua/lib.lua:
// short when its second field is below -1, which no retry is: replyShort
// when even, replyWait when odd), 0 when s is too short to hold it.
func recordLen(s string) int {
	n := replyLen
	if len(s) >= replyShort {
		if v := le64(s[8:]); v < -1 && v&1 == 0 {
			n = replyShort
		} else if v < -1 {
			n = replyWait
		}
	}
	if len(s) < n {
		return 0
	}
	return n
}

// recordsLen is the length of the first n reply records of s, -1 when s
// holds fewer.
func recordsLen(s string, n int) int {
	off := 0
	for range n {
		k := recordLen(s[off:])
		if k == 0 {
			return -1
		}
		off += k
	}
	return off
}

// le64 reads a little-endian int64 from the first 8 bytes of s.
func le64(s string) int64 { return int64(binary.LittleEndian.Uint64([]byte(s[:8]))) }

// stateError is a request whose key holds a value no script of this
// store writes (set by hand, or by another program under the prefix):
// that request's group decided and wrote nothing, the other requests
// batched with it were decided as usual. It names the key by its
// SHA-256 only, since a key holds a caller's own value.
type stateError struct {
	index int    // the request's place in its call
	key   string // the Redis key, once known
}

func (e *stateError) Error() string {
	return "redisstore: a malformed state at the Redis key " + keyHash(e.key) + " (or at one of its window keys, '#' and a number after it: a value no script of this store writes): its decisions fail until the key expires or is deleted"
}

// keyHash names a Redis key in logs without its bytes: "sha256:" and the
// first 16 hex digits of its SHA-256 (redis-cli --scan piped through
// sha256sum finds it).
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:8])
}
