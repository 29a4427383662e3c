package redisstore

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
)

// codecDecode runs lib.lua's decode_counter on each ARGV (a state string)
// for algorithm KEYS-less ARGV[1]: per state {1, a, b, c} or {0} when it
// is refused.
const codecDecode = `
local out = {}
local alg = tonumber(ARGV[1])
for i = 2, #ARGV do
  local a, b, c = decode_counter(ARGV[i], alg)
  if a == nil then
    out[#out + 1] = {0}
  else
    out[#out + 1] = {1, a, b, c}
  end
end
return out
`

// TestDecodeCounterMatchesLua: the direct reply's Go reader of a state
// (decodeCounter) and the scripts' decoder (lib.lua's decode_counter)
// accept the same strings and read the same values, over every header
// byte and every length up to the longest state, in both forms (the
// second form's length byte swept too). Payload bytes are random; the
// values are compared where the Lua doubles are exact.
func TestDecodeCounterMatchesLua(t *testing.T) {
	c := redistest.StartServer(t).Client()
	ctx := context.Background()
	script := redis.NewScript(luaLib + codecDecode)
	rng := rand.New(rand.NewPCG(21, 21))
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.FixedWindow} {
		var states []string
		for h := range 256 {
			for n := 1; n <= 34; n++ {
				// A second form's len(e) byte, every value 0..9; -1: random.
				les := []int{-1}
				if h >= 64 && n > 1 {
					les = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
				}
				for _, le := range les {
					for _, small := range []bool{false, true} {
						b := make([]byte, n)
						b[0] = byte(h)
						for i := 1; i < n; i++ {
							if small {
								b[i] = byte(rng.IntN(64)) // non-negative fields: exact in Lua below 2^53
							} else {
								b[i] = byte(rng.IntN(256))
							}
						}
						if le >= 0 {
							b[1] = byte(le)
						}
						states = append(states, string(b))
					}
				}
			}
		}
		for start := 0; start < len(states); start += 1000 {
			batch := states[start:min(start+1000, len(states))]
			args := []any{int(alg)}
			for _, s := range batch {
				args = append(args, s)
			}
			res, err := script.Run(ctx, c, nil, args...).Slice()
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range batch {
				got := res[i].([]any)
				st, err := decodeCounter(alg, s)
				luaOK := got[0].(int64) == 1
				if luaOK != (err == nil) {
					t.Fatalf("%v %q: Lua accepts %v, Go's reader %v", alg, s, luaOK, err)
				}
				if !luaOK {
					continue
				}
				const exact = 1 << 53
				if st.A < 0 || st.A >= exact || st.B < 0 || st.B >= exact || st.C < 0 || st.C >= exact {
					continue
				}
				if a, b, cc := got[1].(int64), got[2].(int64), got[3].(int64); a != st.A || b != st.B || cc != st.C {
					t.Fatalf("%v %q: Lua read %d %d %d, Go's reader %d %d %d", alg, s, a, b, cc, st.A, st.B, st.C)
				}
			}
		}
	}
}
