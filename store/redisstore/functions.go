package redisstore

// The scripts run as one Redis function library (Redis 7.0 or later),
// loaded once and called by FCALL: Redis builds their closures at
// FUNCTION LOAD, not on every call.

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// library is the function library: the Lua once, then its drivers
// registered, each a function taking KEYS and ARGV. It is named by its
// source's hash, so replicas of different versions each find their own
// on a shared Redis. The drivers have no flags: they write, must not run
// on a stale replica, and are refused when Redis is out of memory.
type library struct {
	name                           string // floodgate_ and 12 hex digits of the source's SHA-1
	src                            string // FUNCTION LOAD's argument
	decide, settle, demand, forget string // the drivers' Redis names
	probe                          string // answers "OK" without touching a key: the health probe
}

// libraryFunctions are the drivers, Redis' <name>_<function>.
var libraryFunctions = []string{"decide", "settle", "demand", "forget"}

// newLibrary is the library of the Lua src (luaSource in a Store), which
// defines libraryFunctions; its name hashes the source with the name left
// out.
func newLibrary(src string) library {
	sum := sha1.Sum([]byte(librarySource("", src)))
	name := "floodgate_" + hex.EncodeToString(sum[:])[:12]
	return library{name: name, src: librarySource(name, src),
		decide: name + "_decide", settle: name + "_settle", demand: name + "_demand", forget: name + "_forget",
		probe: name + "_probe"}
}

// librarySource is src as the library name, its functions registered.
func librarySource(name, src string) string {
	var b strings.Builder
	b.WriteString("#!lua name=" + name + "\n" + src + "\n")
	for _, fn := range libraryFunctions {
		b.WriteString("redis.register_function('" + name + "_" + fn + "', " + fn + ")\n")
	}
	// The probe writes nothing, so it runs wherever PING would.
	b.WriteString("redis.register_function{function_name='" + name + "_probe', callback=function() return 'OK' end, flags={'no-writes', 'allow-stale'}}\n")
	return b.String()
}

// load loads the library on c, replacing one of that name, which is the
// same source (the name hashes it).
func (l *library) load(ctx context.Context, c redis.Cmdable) error {
	return c.FunctionLoadReplace(ctx, l.src).Err()
}

// functionMissing reports whether err is FCALL's answer for a function
// Redis does not hold (first use, FUNCTION FLUSH, a restart or failover
// to a node without it).
func functionMissing(err error) bool {
	return redis.HasErrorPrefix(err, "Function not found") // HasErrorPrefix drops "ERR "
}

// loadLibrary loads s's library on its Redis: on every master of a
// cluster (a call goes to its slot's master, which may be any of them).
// The error is the load's own (READONLY from a replica, a timeout, a
// Redis without functions), which says more than a missing function.
func (s *Store) loadLibrary(ctx context.Context) error {
	if err := onMasters(ctx, s.client, s.lib.load); err != nil {
		return fmt.Errorf("loading the function library %s: %w", s.lib.name, fcallErr(err))
	}
	return nil
}

// onMasters runs fn on client's Redis: on every master of a cluster, in
// parallel.
func onMasters(ctx context.Context, client redis.UniversalClient, fn func(context.Context, redis.Cmdable) error) error {
	if cc, ok := client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) })
	}
	return fn(ctx, client)
}

// fcall runs the function fn of s's library with keys and args, loading
// the library first when Redis lacks it.
func (s *Store) fcall(ctx context.Context, fn string, keys []string, args ...any) (any, error) {
	reply, err := s.client.FCall(ctx, fn, keys, args...).Result()
	if !functionMissing(err) {
		return reply, fcallErr(err)
	}
	if err := s.loadLibrary(ctx); err != nil {
		return nil, err
	}
	reply, err = s.client.FCall(ctx, fn, keys, args...).Result()
	return reply, fcallErr(err)
}

// fcallErr is err, an FCALL's; on a Redis without functions (before
// 7.0, or the command renamed away) a misconfiguration that says so.
func fcallErr(err error) error {
	if redis.HasErrorPrefix(err, "unknown command") {
		return &misconfigError{msg: "the scripts run as Redis functions (FCALL), which need Redis 7.0 or later (Redis answered " + strconv.Quote(err.Error()) + ")"}
	}
	return err
}

// pipeline runs n calls of the function fn in one pipeline (go-redis
// splits it per cluster node, nodes in parallel), call i's keys and args
// from arg, and those Redis answered with a missing function again, once,
// after loading the library. Errors are per command.
func (s *Store) pipeline(ctx context.Context, fn string, n int, arg func(i int) ([]string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	missing := func(c *redis.Cmd) bool { return c == nil || functionMissing(c.Err()) }
	send := func() { // the calls not sent yet or answered with a missing function
		pipe := s.client.Pipeline()
		for i, c := range cmds {
			if missing(c) {
				keys, args := arg(i)
				cmds[i] = pipe.FCall(ctx, fn, keys, args...)
			}
		}
		_, _ = pipe.Exec(ctx)
	}
	send()
	if !slices.ContainsFunc(cmds, missing) {
		return cmds
	}
	if err := s.loadLibrary(ctx); err != nil {
		for _, c := range cmds {
			if missing(c) {
				c.SetErr(err)
			}
		}
		return cmds
	}
	send()
	return cmds
}
