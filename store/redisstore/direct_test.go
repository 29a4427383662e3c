package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestDirectReplyMalformed: a direct reply of the wrong shape, or whose
// allowed bit disagrees with the decision floodgate computes from the
// same state, is an error wrapping errReply for every call of the
// script call, never a panic or a decision.
func TestDirectReplyMalformed(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}
	h := header{nowMs: -1, keepMs: keepMs}
	req := appendRequestMode(appendHeader(nil, h), l, 1, false, 0, 0)
	req[hdrLen-1] = hdrDirect
	state := upgradeTB // 7 of 10 left at the reply's time
	ok := "1780000000,123456;" + string(rune(32+len(state))) + state
	tests := []struct {
		name  string
		reply any
		calls int
		want  string // in the error; "" for none
	}{
		{"well formed", ok, 1, ""},
		{"two calls", "1780000000,123456;" + string(rune(32+len(state))) + state + "\x20", 2, ""},
		{"not a string", int64(1), 1, "want a string"},
		{"no time", "\x20", 1, "without its time"},
		{"the header's time asked for, none given", ";\x20", 1, "without Redis' time"},
		{"time not a number", "x,1;\x20", 1, "time"},
		{"microseconds out of range", "1,1000000;\x20", 1, "time"},
		{"no comma", "1;\x20", 1, "time"},
		{"no request", "1,1;", 1, "ends early"},
		{"one request for two calls", "1,1;\x20", 2, "ends early"},
		{"a byte above 64", "1,1;\x41", 1, "request byte"},
		{"a state longer than the reply", "1,1;\x25ab", 1, "request byte"},
		{"bytes after the last", ok + "x", 1, "after the last request"},
		{"denied where it fits", "1780000000,123456;\x00", 1, "the script allowed=false"},
		{"a malformed state", "1780000000,123456;\x21\xff", 1, "malformed state"},
		{"a state whose last value takes 10 bytes", "1780000000,123456;\x2b\x00" + strings.Repeat("\x01", 10), 1, "malformed state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := make([]*call, tc.calls)
			for i := range calls {
				calls[i] = &call{h: h, buf: req, idx: []int{0}}
			}
			splitDirect(tc.reply, calls)
			if c := calls[0]; c.direct && strings.HasPrefix(tc.reply.(string), "1780000000,123456;") && c.nowMs != 1_780_000_000_123 {
				t.Errorf("now %d ms, want 1780000000123 (TIME's seconds and microseconds)", c.nowMs)
			}
			var err error
			for _, c := range calls {
				if c.err != nil {
					err = c.err
					break
				}
				if _, perr := c.decideDirect(l); perr != nil {
					err = perr
					break
				}
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if !errors.Is(err, errReply) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want errReply saying %q", err, tc.want)
			}
			for i, c := range calls {
				if c.err == nil && c.direct && strings.Contains(tc.want, "ends early") {
					t.Errorf("call %d got a part of a reply that failed", i)
				}
			}
		})
	}
}

// upgradeTB is the token bucket state TestRollingUpgradeState pins: 10
// a minute, 3 spent at 1,780,000,000,123 ms.
const upgradeTB = "\x1a\x10\xa4\x00p\x17{\xe0i\xf9\x02"

// TestDecodeCounterTokenBucket: decodeCounter reads the state lib.lua
// writes for a token bucket (its time in B) as the Go math's own.
func TestDecodeCounterTokenBucket(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}
	want, _ := algorithms.DecideAt(l, algorithms.State{}, algorithms.Request{NowMs: 1_780_000_000_123, Cost: 3})
	if got, err := decodeCounter(l.Algorithm, upgradeTB); err != nil || got.A != want.A || got.B != want.B || got.C != want.C {
		t.Errorf("read %+v, %v; want %+v", got, err, want)
	}
	if s, err := decodeCounter(l.Algorithm, ""); err != nil || s.A != 0 || s.B != 0 || s.C != 0 {
		t.Errorf("no state read as %+v, %v; want the zero State", s, err)
	}
}

// TestDirectManyGroups: a direct call of more groups than one MGET may
// take (Lua's unpack fails past 8,000 values) still decides every one,
// and a repeated key sees the earlier request's charge.
func TestDirectManyGroups(t *testing.T) {
	c := redistest.StartServer(t).Client()
	ctx := context.Background()
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Period: time.Hour}
	var reqs []luaReq
	for i := range 8200 {
		reqs = append(reqs, luaReq{key: "fg:fw:{many}:" + strconv.Itoa(i%4100), l: l, cost: 1, group: true})
	}
	out, err := runScript(ctx, c, pathStore, 1_780_000_000_000, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range out {
		if want := int64(1 - i/4100); !d.Allowed || d.Remaining != want {
			t.Fatalf("request %d: allowed %v, remaining %d; want allowed, remaining %d", i, d.Allowed, d.Remaining, want)
		}
	}
}

// TestDirectReplyBadState: a request whose key held a malformed state
// fails alone, named by its key's hash; the call beside it is decided.
func TestDirectReplyBadState(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Period: time.Second}
	h := header{nowMs: -1}
	req := appendRequestMode(appendHeader(nil, h), l, 1, false, 0, 0)
	calls := []*call{
		{h: h, buf: req, idx: []int{0}, keys: []string{"fg:tb:{bad}"}},
		{h: h, buf: req, idx: []int{0}, keys: []string{"fg:tb:{good}"}},
	}
	splitDirect("1780000000,123456;\x40\x20", calls)
	if !isStateError(calls[0].err) || !strings.Contains(calls[0].err.Error(), keyHash("fg:tb:{bad}")) || strings.Contains(calls[0].err.Error(), "bad}") {
		t.Errorf("the malformed state's call: err %v, want a stateError naming %s and not the key", calls[0].err, keyHash("fg:tb:{bad}"))
	}
	if calls[1].err != nil || !calls[1].direct || !calls[1].allowed {
		t.Errorf("the call beside it: err %v, direct %v, allowed %v; want decided and allowed", calls[1].err, calls[1].direct, calls[1].allowed)
	}
}
