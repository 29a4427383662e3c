package main

// The cost of the pieces a decision script is made of: Redis commands
// called from Lua, the struct library, string functions, a Lua call, a
// table read. Each is measured as a loop run once and 2,001 times in one
// EVAL under callgrind; the difference over 2,000 is the cost of one
// iteration (the loop's own step, about 20 instructions, included).

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
)

// primitive is one measured piece: setup runs once before the loop,
// body once an iteration.
type primitive struct {
	name, setup, body string
	ret               string // what the script returns after the loop ("1" if empty)
	keys              bool   // the body touches KEYS[1], a live 19-byte string with a TTL (measurePrimitives writes it before each run)
}

// primitives are the pieces measured by -primitives, in the order printed.
func primitives() []primitive {
	return []primitive{
		{name: "an empty loop step", setup: "", body: ""},
		{name: "a Lua call of 3 arguments and 3 results", setup: "local function f(x, y, z) return x, y, z end", body: "local a, b, c = f(1, 2, 3)"},
		{name: "a Lua call of 9 arguments and 5 results", setup: "local function f(a, b, c, d, e, g, h, k, l) return a, b, c, d, e end", body: "local a, b, c, d, e = f(1, 2, 3, 4, 5, 6, 7, 8, 9)"},
		{name: "ten arithmetic operators (+, -, *, /, %)", setup: "local x, y = 12345, 678", body: "local v = (x * y + x - y) % 7 + x / y - (x - y) * 3 + y"},
		{name: "a table read", setup: "local T = {} T[300] = 'x'", body: "local v = T[300]"},
		{name: "string.byte, one byte", setup: "local s = 'abcdefghijklm' local sb = string.byte", body: "local h = sb(s, 1)"},
		{name: "string.byte, 13 bytes", setup: "local s = 'abcdefghijklm' local sb = string.byte", body: "local a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13 = sb(s, 1, -1)"},
		{name: "string.char, 13 bytes", setup: "local sc = string.char", body: "local v = sc(35, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)"},
		{name: "struct.unpack, 3 integers (a state)", setup: "local s = 'abcdefghijklm' local su = struct.unpack", body: "local a, b, c = su('<i4i3i5', s, 2)"},
		{name: "struct.unpack, a byte and 4 int64s (a request)", setup: "local s = string.rep('a', 33) local su = struct.unpack", body: "local h, a, b, c, d = su('<Bi8i8i8i8', s, 1)"},
		{name: "struct.pack, a byte and 3 integers (a state)", setup: "local sp = struct.pack", body: "local v = sp('<Bi4i3i5', 35, 86313600, 86400, 12345678901)"},
		{name: "struct.unpack, one double (gcra.lua's state)", setup: "local s = struct.pack('<d', 1e12) local su = struct.unpack", body: "local t = su('<d', s)"},
		{name: "three strings joined (..)", setup: "local a, b = 'x', 'yy'", body: "local v = a .. b .. a"},
		{name: "a number made a string (i .. '')", setup: "", body: "local v = i .. ''"},
		{name: "redis.call GET", body: "local v = redis.call('GET', KEYS[1])", keys: true},
		{name: "redis.call SET key v PX ms", setup: "local v = redis.call('GET', KEYS[1])", body: "redis.call('SET', KEYS[1], v, 'PX', '86528000')", keys: true},
		{name: "redis.call SET key v KEEPTTL", setup: "local v = redis.call('GET', KEYS[1])", body: "redis.call('SET', KEYS[1], v, 'KEEPTTL')", keys: true},
		{name: "redis.call SETRANGE key 0 v (same length, in place)", setup: "local v = redis.call('GET', KEYS[1])", body: "redis.call('SETRANGE', KEYS[1], '0', v)", keys: true},
		{name: "redis.call PEXPIRE key ms", body: "redis.call('PEXPIRE', KEYS[1], '86528000')", keys: true},
		{name: "a Lua call of 14 arguments and 8 results (an algorithm's)", setup: "local function f(a, b, c, d, e, g, h, k, l, m, n, o, p, q) return a, b, c, d, e, g, h, k end", body: "local a, b, c, d, e, g, h, k = f(1, 2, 3, 4, 5, 6, 7, 8, 9, nil, nil, nil, nil, nil)"},
		{name: "struct.pack, a byte and 5 int64s (a reply)", setup: "local sp = struct.pack", body: "local v = sp('<Bi8i8i8i8i8', 1, 999, 0, 86400, 86400, 0)"},
		{name: "struct.pack, '<i5I3' (a token bucket's state)", setup: "local sp = struct.pack", body: "local v = sp('<i5I3', 12345678901, 7)"},
		{name: "struct.unpack, '<i5I3' (a token bucket's state)", setup: "local s = struct.pack('<i5I3', 12345678901, 7) local su = struct.unpack", body: "local a, b = su('<i5I3', s)"},
		{name: "redis.call INCRBY key 1", body: "redis.call('INCRBY', KEYS[1] .. 'n', '1')", keys: true},
		{name: "a key joined with a cached suffix (key .. s)", setup: "local s = ':12345'", body: "local v = KEYS[1] .. s", keys: true},
		{name: "an integer stored in a table's array part", setup: "local t = {}", body: "t[i] = i * 1000"},
		{name: "the same, the table the reply (Redis writes each integer)", setup: "local t = {}", body: "t[i] = i * 1000", ret: "t"},
		{name: "string.byte, 4 bytes", setup: "local s = 'abcdefghijklm' local sb = string.byte", body: "local a, b, c, d = sb(s, 3, 6)"},
		{name: "tonumber of a 13-digit string", setup: "local s = '1234567890123'", body: "local v = tonumber(s)"},
		{name: "redis.call SET key v PXAT ms", setup: "local v = redis.call('GET', KEYS[1])", body: "redis.call('SET', KEYS[1], v, 'PXAT', '4102444800000')", keys: true},
		{name: "redis.call SET key n PX ms, n a Lua number", body: "redis.call('SET', KEYS[1], 1234567890123, 'PX', '86528000')", keys: true},
		{name: "redis.call GET of an integer value", setup: "redis.call('SET', KEYS[1], '1234567890123', 'PX', '86528000')", body: "local v = redis.call('GET', KEYS[1])", keys: true},
		{name: "a Lua call of 6 arguments and 6 results", setup: "local function f(a, b, c, d, e, g) return a, b, c, d, e, g end", body: "local a, b, c, d, e, g = f(1, 2, 3, 4, 5, 6)"},
		{name: "8 short reply records, each packed, joined (table.concat)", setup: "local sp, tc = struct.pack, table.concat local t = {}", body: "for j = 1, 8 do t[j] = sp('<i8i8', 3997, -172800002) end local v = tc(t)"},
		{name: "the same 16 integers in a table, one struct.pack", setup: "local sp = struct.pack local u = {} local F = '<' .. string.rep('i8', 16)", body: "for j = 1, 16, 2 do u[j] = 3997 u[j + 1] = -172800002 end local v = sp(F, unpack(u))"},
		{name: "a loop of 8 empty steps (to subtract from the two above)", body: "for j = 1, 8 do end"},
		{name: "struct.unpack, a byte and 2 int64s", setup: "local s = string.rep('a', 33) local su = struct.unpack", body: "local h, a, b = su('<Bi8i8', s, 1)"},
		{name: "struct.pack, 2 int64s (a short reply)", setup: "local sp = struct.pack", body: "local v = sp('<i8i8', 3997, -172800002)"},
		{name: "redis.call MGET of 8 keys (one key 8 times)", setup: "local k = KEYS[1]", body: "local v = redis.call('MGET', k, k, k, k, k, k, k, k)", keys: true},
		{name: "8 redis.call GETs", setup: "local k = KEYS[1]", body: "for j = 1, 8 do local v = redis.call('GET', k) end", keys: true},
		{name: "redis.call PEXPIREAT key ms", body: "redis.call('PEXPIREAT', KEYS[1], '4102444800000')", keys: true},
		{name: "redis.call DEL, the key then made by SETRANGE and PEXPIRE", setup: "local v = redis.call('GET', KEYS[1])", body: "redis.call('DEL', KEYS[1]) redis.call('SETRANGE', KEYS[1], '0', v) redis.call('PEXPIRE', KEYS[1], '86528000')", keys: true},
		{name: "redis.call DEL, the key then made by SETRANGE and PEXPIREAT", setup: "local v = redis.call('GET', KEYS[1])", body: "redis.call('DEL', KEYS[1]) redis.call('SETRANGE', KEYS[1], '0', v) redis.call('PEXPIREAT', KEYS[1], '4102444800000')", keys: true},
		{name: "redis.call DEL, the key then made by SET PX", setup: "local v = redis.call('GET', KEYS[1])", body: "redis.call('DEL', KEYS[1]) redis.call('SET', KEYS[1], v, 'PX', '86528000')", keys: true},
		{name: "redis.call DEL, the key then made by SET PXAT", setup: "local v = redis.call('GET', KEYS[1])", body: "redis.call('DEL', KEYS[1]) redis.call('SET', KEYS[1], v, 'PXAT', '4102444800000')", keys: true},
		{name: "redis.call DEL, the key then made by SETRANGE", setup: "local v = redis.call('GET', KEYS[1])", body: "redis.call('DEL', KEYS[1]) redis.call('SETRANGE', KEYS[1], '0', v)", keys: true},
		{name: "redis.call TIME, made Unix ms", body: "local t = redis.call('TIME') local us = t[2] local ms = t[1] * 1000 + (us - us % 1000) / 1000"},
		{name: "a table of 8 strings joined (table.concat)", setup: "local t = {} for j = 1, 8 do t[j] = string.rep('x', 41) end local tc = table.concat", body: "local v = tc(t)"},
	}
}

// measurePrimitives prints each primitive's instructions an iteration,
// on a server under callgrind.
func measurePrimitives(ctx context.Context, out io.Writer, srv *server, only string) error {
	const key = "prim:{x}"
	const loops = 2000
	fmt.Fprintln(out, "| piece | instructions |")
	fmt.Fprintln(out, "|---|---:|")
	for _, p := range primitives() {
		if !matches(p.name, only) {
			continue
		}
		src := "local n = tonumber(ARGV[1]) " + p.setup + " for i = 1, n do " + p.body + " end return " + cmp.Or(p.ret, "1")
		var keys []string
		if p.keys {
			keys = []string{key}
		}
		run := func(n int) (int64, error) {
			// A fresh live value each run: SETRANGE turns the stored
			// string into a raw one on its first call, and every later
			// call writes in place.
			if err := srv.client.Set(ctx, key, "c\x03\x80\n%\x05\x80Q\x01\x00\x18\x15\xd1f\xef\xbc\x06\x00\x00", 0).Err(); err != nil {
				return 0, err
			}
			if err := srv.client.PExpire(ctx, key, 86_400_000_000).Err(); err != nil {
				return 0, err
			}
			return srv.counted(func() error { return srv.client.Eval(ctx, src, keys, n).Err() })
		}
		one, err := run(1)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		many, err := run(loops + 1)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		fmt.Fprintf(out, "| %s | %.0f |\n", p.name, float64(many-one)/loops)
	}
	return nil
}

// runPrimitives starts a server under callgrind and measures the
// primitives on it.
func runPrimitives(ctx context.Context, out io.Writer, only string) error {
	dir, err := os.MkdirTemp("", "rediscost")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := startServer(ctx, dir)
	if err != nil {
		return err
	}
	defer srv.stop()
	return measurePrimitives(ctx, out, srv, only)
}
