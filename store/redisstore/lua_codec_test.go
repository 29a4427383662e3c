package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// codecRoundTrip packs a, c, e and b (ARGV[1..4]) as lib.lua's codec
// does, each in int_len's bytes but e in ARGV[5] bytes (0: the first
// form), with pack_fmt's format, and reads the value back with
// read_fmt's (the header too), answering the value and the four
// integers read.
const codecRoundTrip = `
read_header('') -- binds redis.call and struct's functions
local a, c, e, b, le = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local la, lc, lb = int_len(a), int_len(c), int_len(b)
local h = la * 8 + lc
if le > 0 then
  h = h + 64
end
local v = struct.pack(PACK_FMT[(h * 8 + le) * 9 + lb] or pack_fmt(h, le, lb), h, le, a, c, e, b)
local f = READ_FMT[(h * 8 + le) * 32 + #v] or read_fmt(h, le, #v)
local rh, rle, ra, rc, re, rb = struct.unpack(f, v)
if rh ~= h or rle ~= le then
  return redis.error_reply("the header read back as " .. rh .. ", " .. rle)
end
return {v, string.format('%d', ra), string.format('%d', rc), string.format('%d', re), string.format('%d', rb)}
`

// minLen is the fewest bytes of two's complement v needs, 0 for 0: what
// lib.lua's int_len must answer.
func minLen(v int64) int {
	n := 0
	for lo, hi := int64(0), int64(0); v < lo || v > hi; n++ {
		lo, hi = -(int64(1) << (8*(n+1) - 1)), int64(1)<<(8*(n+1)-1)-1
	}
	return n
}

// TestStateCodecLengths packs values at every byte-length boundary (the
// comparisons of lib.lua's int_len) in each field of both forms (the
// second with an e of 3 and of 4 bytes) and checks each takes the fewest
// bytes and reads back unchanged.
func TestStateCodecLengths(t *testing.T) {
	c := redistest.StartServer(t).Client()
	ctx := context.Background()
	script := redis.NewScript(luaLib + codecRoundTrip)
	var vals []int64
	vals = append(vals, 0)
	for n := 1; n <= 6; n++ { // beyond 2^53 doubles are not exact
		top := int64(1) << (8*n - 1)
		vals = append(vals, top-1, top, -top, -top-1)
	}
	vals = append(vals, 1, -1, 1<<53-1, -(1 << 53))
	for _, form := range []struct{ e, le int64 }{{0, 0}, {-1 << 23, 3}, {1<<31 - 1, 4}} {
		for _, v := range vals {
			// v in each field in turn (a, c, b), small values in the others.
			for _, acb := range [][3]int64{{v, 5, -3}, {-3, v, 5}, {5, -3, v}} {
				res, err := script.Run(ctx, c, []string{}, acb[0], acb[1], form.e, acb[2], form.le).Slice()
				if err != nil {
					t.Fatalf("%v, e %d: %v", acb, form.e, err)
				}
				stored := res[0].(string)
				la, lc, lb := minLen(acb[0]), minLen(acb[1]), minLen(acb[2])
				want, head, second := 1+la+lb+lc, la*8+lc, ""
				if form.le > 0 {
					want, head, second = 2+la+lb+lc+int(form.le), 64+head, string([]byte{byte(form.le)})
				}
				if len(stored) != want || int(stored[0]) != head || (second != "" && stored[1:2] != second) {
					t.Errorf("%v, e %d: stored %q, %d bytes; want %d bytes, header %d", acb, form.e, stored, len(stored), want, head)
				}
				for i, want := range []int64{acb[0], acb[1], form.e, acb[2]} {
					if got := res[1+i].(string); got != strconv.FormatInt(want, 10) {
						t.Errorf("%v, e %d: field %d read back as %s", acb, form.e, i, got)
					}
				}
			}
		}
	}
}

// pxSteps are the steps px_string rounds some values to: the first above
// each bound.
var pxSteps = map[int64]int64{1025: 16, 16385: 256, 262145: 4096, 1<<22 + 1: 65536, 1<<26 + 1: 1 << 20, 1<<30 + 3: 1 << 24, 1<<33 + 1: 1 << 24, 1<<34 + 1: 1 << 28}

// TestPXString: a PX is never below the TTL asked for, at most 1/64
// above it, and exact below 1,024 ms and beyond 2^38 ms; and the
// rounded values are few (px_string keeps each one's string).
func TestPXString(t *testing.T) {
	c := redistest.StartServer(t).Client()
	ctx := context.Background()
	script := redis.NewScript(luaLib + `
local out = {}
for i = 1, #ARGV do
  out[i] = px_string(tonumber(ARGV[i]))
end
return out
`)
	var px []any
	for _, v := range []int64{1, 2, 1023, 1024, 1025, 1039, 16383, 16384, 16385, 262143, 262144, 262145,
		1<<22 - 1, 1 << 22, 1<<22 + 1, 1<<26 - 1, 1<<26 + 1, 1<<30 + 3, 1<<33 + 1, 1<<34 - 1, 1<<34 + 1, 1<<38 - 1, 1 << 38, 1<<38 + 1, 1<<40 + 7, 99_999_999_999_999} {
		px = append(px, v)
	}
	// A range 64 steps of 4,096 ms wide, to count the distinct values.
	first := len(px)
	for v := int64(3_000_000); v < 3_000_000+4096*64; v += 1000 {
		px = append(px, v)
	}
	res, err := script.Run(ctx, c, []string{}, px...).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for i, s := range res {
		want := px[i].(int64)
		got, err := strconv.ParseInt(s, 10, 64)
		if err != nil || got < want || got > want+want/64 {
			t.Errorf("px_string(%d) = %q, want in [%d, %d]", want, s, want, want+want/64)
		}
		if (want < 1024 || want >= 1<<38) && got != want {
			t.Errorf("px_string(%d) = %d, want it exact", want, got)
		}
		if step, ok := pxSteps[want]; ok && got != (want+step-1)/step*step {
			t.Errorf("px_string(%d) = %d, want it rounded up to a multiple of %d", want, got, step)
		}
		if i >= first {
			distinct[s] = true
		}
	}
	// 263 values 1,000 ms apart, where the step is 4,096 ms.
	if len(distinct) > 65 {
		t.Errorf("%d distinct PX strings over 64 steps of 4,096 ms, want at most 65", len(distinct))
	}
}

// TestStateStaysMinimal: every write packs each field in the fewest
// bytes it needs, also when it rewrites a state whose c it keeps (whose
// length pack_counter takes from the header read rather than from
// int_len) or changes (a limit of another rate, a window that rolled),
// for each way a counter is written: a lone Decide, a Decide of two
// requests of one key, and a settlement; months from Redis' clock, where
// the key's expiry does not fit the second form, and near it, where it
// does (e in 3 bytes when it fits, else 4, the value 12 bytes at most).
func TestStateStaysMinimal(t *testing.T) {
	c, s := clientTimeStore(t)
	stateStaysMinimal(t, c, s, time.UnixMilli(1_780_000_000_000), false)
	stateStaysMinimal(t, c, s, time.Now().Truncate(time.Hour), true)
}

// stateStaysMinimal runs TestStateStaysMinimal's steps from t0; near says
// t0 is near Redis' clock, where every state of 7 bytes or fewer must
// record the key's expiry.
func stateStaysMinimal(t *testing.T, c *redis.Client, s *Store, t0 time.Time, near bool) {
	ctx := context.Background()
	type step struct {
		at    time.Duration // after t0
		limit algorithms.Limit
		cost  int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"leaky bucket, then another rate", []step{
			{0, periodLimit(algorithms.LeakyBucket, 100, time.Minute), 1},
			{time.Second, periodLimit(algorithms.LeakyBucket, 100, time.Minute), 2},
			{2 * time.Second, periodLimit(algorithms.LeakyBucket, 7, time.Second), 2},
			{3 * time.Second, periodLimit(algorithms.LeakyBucket, 7, time.Second), 1},
		}},
		{"sliding window, rolling", []step{
			{0, periodLimit(algorithms.SlidingWindow, 300, time.Second), 2},
			{100 * time.Millisecond, periodLimit(algorithms.SlidingWindow, 300, time.Second), 200},
			{1100 * time.Millisecond, periodLimit(algorithms.SlidingWindow, 300, time.Second), 2},
			{1200 * time.Millisecond, periodLimit(algorithms.SlidingWindow, 300, time.Second), 2},
		}},
	} {
		for _, path := range []string{"lone", "general", "settle"} {
			t.Run(tc.name+"/"+path+"/"+t0.Format(time.DateOnly), func(t *testing.T) {
				key := "min:" + tc.name + ":" + path + t0.String()
				for i, st := range tc.steps {
					now := t0.Add(st.at)
					switch path {
					case "lone":
						if err := s.Decide(ctx, now, []store.Request{{Key: key, Limit: st.limit, Cost: st.cost}}, make([]algorithms.Decision, 1)); err != nil {
							t.Fatal(err)
						}
					case "general":
						half := store.Request{Key: key, Limit: st.limit, Cost: st.cost / 2}
						rest := store.Request{Key: key, Limit: st.limit, Cost: st.cost - st.cost/2}
						if err := s.Decide(ctx, now, []store.Request{half, rest}, make([]algorithms.Decision, 2)); err != nil {
							t.Fatal(err)
						}
					case "settle":
						if _, err := s.Settle(ctx, now, store.Settlement{Key: key, Limit: st.limit, Actual: st.cost, IdempotencyKey: key + strconv.Itoa(i)}); err != nil {
							t.Fatal(err)
						}
					}
					v, err := c.Get(ctx, KeyName(DefaultPrefix, st.limit.Algorithm, key)).Result()
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					h, body, le := int(v[0]), v[1:], 0
					if h >= 64 {
						h, body, le = h-64, v[2:], int(v[1])
						if len(v) > 12 {
							t.Errorf("step %d: state %q: %d bytes in the second form, want 12 at most", i, v, len(v))
						}
					}
					la, lc := h>>3, h&7
					lb := len(body) - la - lc - le
					if la > 7 || lb < 0 || lb > 8 {
						t.Fatalf("step %d: state %q: bad lengths", i, v)
					}
					a, cv, b := leInt(body[:la]), leInt(body[la:la+lc]), leInt(body[la+lc+le:])
					if la != minLen(a) || lc != minLen(cv) || lb != minLen(b) {
						t.Errorf("step %d: state %q packs a=%d, c=%d, b=%d in %d, %d, %d bytes; want %d, %d, %d",
							i, v, a, cv, b, la, lc, lb, minLen(a), minLen(cv), minLen(b))
					}
					if e := leInt(body[la+lc : la+lc+le]); le != 0 && le != max(3, minLen(e)) {
						t.Errorf("step %d: state %q packs e=%d in %d bytes, want %d", i, v, e, le, max(3, minLen(e)))
					}
					if near && le == 0 && len(v)+5 <= 12 {
						t.Errorf("step %d: state %q near Redis' clock records no expiry", i, v)
					}
				}
			})
		}
	}
}

// clientTimeStore is a Store on a Redis of its own, deciding at the now
// passed to Decide, one call at a time.
func clientTimeStore(t *testing.T) (*redis.Client, *Store) {
	t.Helper()
	c := redistest.StartServer(t).Client()
	s, err := New(c, Config{ClientTime: true, Timeout: 5 * time.Second, BatchMaxSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return c, s
}

// periodLimit is a limit of n requests a period p.
func periodLimit(a algorithms.Algorithm, n int64, p time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: a, Requests: n, Period: p}
}

// leInt reads a little-endian two's complement integer of len(s) bytes
// (0..8; 0 for none), as lua/lib.lua's codec writes it.
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
