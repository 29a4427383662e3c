package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// TestLuaCalendarSkew: floodgate computes a calendar limit's boundaries
// from its own clock; the script decides at Redis' clock. A Redis 3 ms
// past the month's end (floodgate 5 ms before it) decides in the new month
// exactly as floodgate's own DecideAt at that instant would; a Redis
// behind decides at the boundaries' start; a Redis a whole period ahead
// admits nothing and loses nothing.
func TestLuaCalendarSkew(t *testing.T) {
	c := redistest.StartServer(t).Client()
	ctx := context.Background()
	jakarta, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		t.Fatal(err)
	}
	feb1 := time.Date(2027, 2, 1, 0, 0, 0, 0, jakarta).UnixMilli()
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindow} {
		l := algorithms.Limit{Algorithm: alg, Requests: 3, Calendar: algorithms.Month, Location: jakarta}
		key := "calskew:" + alg.String()
		run := func(redisNow, goNow, cost int64) algorithms.Decision {
			t.Helper()
			out, err := runScriptHeader(ctx, c, header{nowMs: redisNow, keepMs: keepMs, calMs: goNow}, []luaReq{{key: key, l: l, cost: cost}})
			if err != nil {
				t.Fatal(err)
			}
			return out[0]
		}
		// January spent, on both clocks.
		if d := run(feb1-10, feb1-10, 3); !d.Allowed {
			t.Fatalf("%v January: %+v", alg, d)
		}
		state := algorithms.State{A: time.Date(2027, 1, 1, 0, 0, 0, 0, jakarta).UnixMilli(), B: 3}
		// Redis just past the boundary, floodgate just before it.
		_, want := algorithms.DecideAt(l, state, algorithms.Request{NowMs: feb1 + 3, Cost: 1})
		if got := run(feb1+3, feb1-5, 1); got != want || got.Allowed != (alg == algorithms.FixedWindow) {
			t.Errorf("%v Redis 3 ms into February: got %+v, want %+v (the fixed window allowed, the sliding one weighing January)", alg, got, want)
		}
		// Redis a whole month ahead of floodgate: out of range.
		if got := run(feb1+40*86_400_000, feb1-5, 1); got.Allowed || got.RetryAfter != time.Second || got.Remaining != 0 {
			t.Errorf("%v Redis a month ahead: %+v, want a deny for 1s", alg, got)
		}
		// Floodgate in March, Redis still in February: decided at March's
		// start, counted there.
		mar1 := time.Date(2027, 3, 1, 0, 0, 0, 0, jakarta).UnixMilli()
		if got := run(mar1-1000, mar1+1000, 3); !got.Allowed {
			t.Errorf("%v Redis behind, into March: %+v", alg, got)
		}
		if got := run(mar1+2000, mar1+2000, 1); got.Allowed {
			t.Errorf("%v March spent while Redis was behind, admits more: %+v", alg, got)
		}
	}
}

// TestStoreCalendarRedisTime: the store on Redis' clock (ClientTime off,
// the default) with floodgate's clock passed as now: the boundaries come
// from that now and Redis decides in the same period; a now a whole period
// behind Redis admits nothing rather than count in the wrong month.
func TestStoreCalendarRedisTime(t *testing.T) {
	c := redistest.StartServer(t).Client()
	ctx := context.Background()
	// Redis' clock is the default; the timeout is far above the default's
	// 50ms, so that loading the library on a loaded machine is no failure.
	s, err := New(c, Config{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Calendar: algorithms.Day}
	redisNow, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	b := algorithms.Day.Bounds(nil, redisNow.UnixMilli())
	if b[2]-redisNow.UnixMilli() < 60_000 {
		t.Skip("too close to UTC midnight for a stable test")
	}
	out := make([]algorithms.Decision, 1)
	for i, want := range []bool{true, true, false} {
		if err := s.Decide(ctx, redisNow, []store.Request{{Key: "day", Limit: l, Cost: 1}}, out); err != nil {
			t.Fatal(err)
		}
		if out[0].Allowed != want || out[0].ResetAfter > time.Duration(b[2]-redisNow.UnixMilli())*time.Millisecond {
			t.Fatalf("call %d: %+v, want allowed %v, reset by UTC midnight", i, out[0], want)
		}
	}
	if err := s.Decide(ctx, redisNow.Add(-72*time.Hour), []store.Request{{Key: "day2", Limit: l, Cost: 1}}, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Allowed || out[0].RetryAfter != time.Second {
		t.Fatalf("floodgate's clock 3 days behind Redis: %+v, want a deny for 1s", out[0])
	}
}
