package redisstore

// The direct path's reply (lua/lib.lua): the script decides and writes,
// and answers only what it read (each key's state string) and whether it
// allowed each request; floodgate computes the decision's fields from
// the same inputs with the same math (algorithms.DecideAt). Packing seven
// fields a request cost Redis more than the decision itself.

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/algorithms"
)

// stateEpochMs is lua/lib.lua's STATE_EPOCH_MS: a counter state's time
// field is stored relative to it. TestStateCodecLengths checks that the
// two agree.
const stateEpochMs = 1767225600000

// directNow reads the prefix of a direct reply: the decisions' time in
// Unix ms (Redis' TIME, or hdrNow when the header gave it) and the rest
// of the reply.
func directNow(reply string, hdrNow int64) (nowMs int64, rest string, err error) {
	head, rest, ok := strings.Cut(reply, ";")
	if !ok {
		return 0, "", fmt.Errorf("%w: a direct reply without its time", errReply)
	}
	if head == "" {
		if hdrNow < 0 {
			return 0, "", fmt.Errorf("%w: a direct reply without Redis' time", errReply)
		}
		return hdrNow, rest, nil
	}
	secs, usecs, ok := strings.Cut(head, ",")
	sec, err1 := strconv.ParseInt(secs, 10, 64)
	usec, err2 := strconv.ParseInt(usecs, 10, 64)
	if !ok || err1 != nil || err2 != nil || sec < 0 || usec < 0 || usec >= 1e6 {
		return 0, "", fmt.Errorf("%w: a direct reply's time %q", errReply, head)
	}
	return sec*1000 + usec/1000, rest, nil
}

// nextDirect reads one request's part of a direct reply: whether the
// script allowed it, whether its key held a malformed state (lib.lua's
// BAD_TAG: it decided nothing), the state it read ("" for none), and what
// follows.
func nextDirect(rest string) (allowed, bad bool, state, tail string, err error) {
	if rest == "" {
		return false, false, "", "", fmt.Errorf("%w: a direct reply ends early", errReply)
	}
	tag := rest[0]
	if tag == badTag {
		return false, true, "", rest[1:], nil
	}
	n := int(tag & 31)
	if tag >= 64 || 1+n > len(rest) {
		return false, false, "", "", fmt.Errorf("%w: a direct reply's request byte %d", errReply, tag)
	}
	return tag&32 != 0, false, rest[1 : 1+n], rest[1+n:], nil
}

// badTag is lib.lua's BAD_TAG.
const badTag = 64

// late is lib.lua's LATE, a decide call's whole reply when Redis started
// it after its deadline.
const late = "!"

// decodeCounter reads a counter algorithm's state string (lua/lib.lua's
// codec, either form, read as load_counter reads it): A, B, C with the
// time field made absolute; the zero State for "".
func decodeCounter(alg algorithms.Algorithm, s string) (algorithms.State, error) {
	if s == "" {
		return algorithms.State{}, nil
	}
	h := int(s[0])
	la, lc := h/8, h%8
	// off is where a starts, le the length of the second form's e. A
	// header with bit 7 set stays malformed: its la is still above 7.
	off, le := 1, 0
	if la > 7 && len(s) > 1 { // the second form (lib.lua)
		la, off, le = la-8, 2, int(s[1])
	}
	lb := len(s) - off - la - lc - le
	if la > 7 || le > 7 || lb < 0 || lb > 8 {
		return algorithms.State{}, fmt.Errorf("%w: a malformed state of %d bytes", errReply, len(s))
	}
	a := leInt(s[off : off+la])
	c := leInt(s[off+la : off+la+lc])
	b := leInt(s[off+la+lc+le:])
	if alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket {
		b += stateEpochMs
	} else {
		a += stateEpochMs
	}
	return algorithms.State{A: a, B: b, C: c}, nil
}

// leInt reads a little-endian two's complement integer of len(s) bytes
// (0..8; 0 for none).
func leInt(s string) int64 {
	var u uint64
	for i := len(s) - 1; i >= 0; i-- {
		u = u<<8 | uint64(s[i])
	}
	if n := len(s); n > 0 && n < 8 && s[n-1]&0x80 != 0 {
		u |= ^uint64(0) << (8 * n) // sign-extend
	}
	return int64(u)
}

// decideDirect is the decision of c, a direct call of one request against
// l, from its part of the reply (splitDirect): its bytes as sent
// (appendRequestMode's), decided at the reply's now on the state the
// script read. The script's allowed bit must agree: a decision that
// disagrees is an error, never an answer, since the script wrote by its
// own.
func (c *call) decideDirect(l algorithms.Limit) (algorithms.Decision, error) {
	req := c.buf[hdrLen:]
	state, _ := c.reply.(string)
	nowMs, allowed := c.nowMs, c.allowed
	if len(req) < reqLen {
		return algorithms.Decision{}, fmt.Errorf("%w: a request of %d bytes", errReply, len(req))
	}
	flags := req[0] >> 3
	r := algorithms.Request{NowMs: nowMs, Cost: int64(binary.LittleEndian.Uint64(req[25:]))}
	if flags&flagDebt != 0 {
		r.Mode |= algorithms.Debt
	}
	if flags&flagNoWait != 0 {
		r.Mode |= algorithms.NoWait
	}
	if flags&flagCalendar != 0 {
		if len(req) < reqLen+calLen {
			return algorithms.Decision{}, fmt.Errorf("%w: a calendar request of %d bytes", errReply, len(req))
		}
		for i := range r.Bounds {
			r.Bounds[i] = int64(binary.LittleEndian.Uint64(req[reqLen+8*i:]))
		}
	}
	s, err := decodeCounter(l.Algorithm, state)
	if err != nil {
		return algorithms.Decision{}, err
	}
	_, d := algorithms.DecideAt(l, s, r)
	if d.Allowed != allowed {
		return algorithms.Decision{}, fmt.Errorf("%w: the script allowed=%v, the same decision here %v", errReply, allowed, d.Allowed)
	}
	d.Debt, d.Unrecorded = 0, 0 // Settle reports them (store.Store)
	return d, nil
}
