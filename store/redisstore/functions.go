package redisstore

// Redis 7 functions: the decision scripts loaded once as a
// function library and run by FCALL, so Redis builds their closures at
// FUNCTION LOAD instead of on every call (bench/history/14-scripts-round-3-2026-11-30.md,
// "Redis functions"). EVALSHA stays the fallback: for good (per
// Store) once Redis does not know FUNCTION or FCALL (Redis 6, a renamed
// command) or refuses FUNCTION LOAD (an ACL).

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// library is the decision scripts as one Redis function library: the
// files of both scripts (script.go), lua/lib.lua and the twins once, each
// driver (lua/lean.lua, lua/batch.lua) the body of a function taking KEYS
// and ARGV. The library is named by the hash of its source, so replicas
// of different versions each find their own on a shared Redis. The
// functions have no flags: they write (no no-writes), must not run on a
// stale replica (no allow-stale), and Redis refuses them when it is out
// of memory (no allow-oom), as it refuses their writes by EVALSHA.
type library struct {
	name string // floodgate_<the first 12 hex digits of the SHA-1 of the source>
	src  string // FUNCTION LOAD's argument
	lean string // the function of the lean script
	full string // the function of the full script
}

// newLibrary is the library of this tree's scripts.
func newLibrary() library {
	common := luaLib + luaTokenBucket + luaSlidingWindow + luaFixedWindow + luaLeakyBucket + luaCounter + luaSlidingWindowLog
	return buildLibrary(common, luaLean, luaBatch)
}

// buildLibrary is the library of the shared Lua common and the drivers
// lean and full. Its name hashes the whole source, the wrapper included,
// with the name left out.
func buildLibrary(common, lean, full string) library {
	sum := sha1.Sum([]byte(librarySource("", common, lean, full)))
	name := "floodgate_" + hex.EncodeToString(sum[:])[:12]
	return library{name: name, src: librarySource(name, common, lean, full), lean: name + "_lean", full: name + "_full"}
}

// librarySource wraps common and the drivers into the library name: the
// drivers read KEYS and ARGV, which a function gets as arguments.
func librarySource(name, common, lean, full string) string {
	register := func(fn, body string) string {
		return "\nredis.register_function{function_name = '" + fn + "', callback = function(KEYS, ARGV)\n" + body + "\nend}\n"
	}
	return "#!lua name=" + name + "\n" + common + register(name+"_lean", lean) + register(name+"_full", full)
}

// function is the name of the function for a call with (log) or without
// a sliding window log.
func (l *library) function(log bool) string {
	if log {
		return l.full
	}
	return l.lean
}

// load loads the library on c; a library of that name already there is
// the same source (the name is its hash), so it counts as loaded.
func (l *library) load(ctx context.Context, c redis.Cmdable) error {
	err := c.FunctionLoad(ctx, l.src).Err()
	if err != nil && strings.Contains(err.Error(), "already exists") {
		return nil
	}
	return err
}

// functionMissing reports whether err is FCALL's answer for a function
// Redis does not hold (first use, FUNCTION FLUSH, a restart or failover
// to a node without it).
func functionMissing(err error) bool {
	return redis.HasErrorPrefix(err, "Function not found") // HasErrorPrefix drops "ERR "
}

// functionsRefused reports whether err means this Redis will not run
// functions for us: it does not know the command (Redis 6, a renamed
// command) or the ACL forbids it.
func functionsRefused(err error) bool {
	return redis.HasErrorPrefix(err, "unknown command") || redis.HasErrorPrefix(err, "NOPERM")
}

// loadLibrary loads s's library on Redis: on every master of a cluster
// (a call goes to its slot's master, which may be any of them).
func (s *Store) loadLibrary(ctx context.Context) error {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return s.lib.load(ctx, c)
		})
	}
	return s.lib.load(ctx, s.client)
}

// recoverFunctions handles the error of an FCALL and reports whether the
// call should be made again: after loading the library when Redis lacked
// it, or by EVALSHA once s has switched to it for good (Redis refused
// FCALL or FUNCTION LOAD). Otherwise it returns the error the call ends
// with: err, or the load's own (READONLY from a replica, a timeout), which
// says more than a missing function; the next call tries again.
func (s *Store) recoverFunctions(ctx context.Context, err error) (retry bool, _ error) {
	switch {
	case functionsRefused(err):
		s.noFunctions.Store(true)
		return true, nil
	case !functionMissing(err):
		return false, err
	}
	if lerr := s.loadLibrary(ctx); lerr != nil {
		if functionsRefused(lerr) {
			s.noFunctions.Store(true)
			return true, nil
		}
		return false, fmt.Errorf("loading the function library %s: %w", s.lib.name, lerr)
	}
	return true, nil
}

// run1 runs one script call (log: with a sliding window log) with keys
// and args, as a function unless s uses EVALSHA.
func (s *Store) run1(ctx context.Context, log bool, keys []string, args ...any) (any, error) {
	if !s.noFunctions.Load() {
		reply, err := s.client.FCall(ctx, s.lib.function(log), keys, args...).Result()
		if err == nil {
			return reply, nil
		}
		if retry, err := s.recoverFunctions(ctx, err); !retry {
			return nil, err
		}
		if !s.noFunctions.Load() {
			return s.client.FCall(ctx, s.lib.function(log), keys, args...).Result()
		}
	}
	return s.scriptFor(log).Run(ctx, s.client, keys, args...).Result()
}

// runPipeline runs the units' script calls in one pipeline (go-redis
// splits it per cluster node and runs the nodes in parallel), as
// functions unless s uses EVALSHA. The calls Redis answered with a
// missing function or NOSCRIPT are retried in a second pipeline, once:
// after loading the library, or by EVAL (which loads the script).
func (s *Store) runPipeline(ctx context.Context, units []*unit) {
	fn := !s.noFunctions.Load()
	cmds := make([]*redis.Cmd, len(units))
	pipe := s.client.Pipeline()
	for i, u := range units {
		if fn {
			cmds[i] = pipe.FCall(ctx, s.lib.function(u.log), u.keys, u.args...)
		} else {
			cmds[i] = s.scriptFor(u.log).EvalSha(ctx, pipe, u.keys, u.args...)
		}
	}
	_, _ = pipe.Exec(ctx) // errors are per command
	var retry []int
	var failed error // an FCALL error that asks for recovery
	for i, u := range units {
		err := cmds[i].Err()
		switch {
		case fn && (functionMissing(err) || functionsRefused(err)):
			failed = err
		case !fn && redis.HasErrorPrefix(err, "NOSCRIPT"):
		default:
			u.split(cmds[i].Result())
			continue
		}
		retry = append(retry, i)
	}
	if len(retry) == 0 {
		return
	}
	if failed != nil {
		if ok, err := s.recoverFunctions(ctx, failed); !ok {
			for _, i := range retry {
				units[i].split(nil, err)
			}
			return
		}
	}
	fn = !s.noFunctions.Load()
	pipe = s.client.Pipeline()
	for _, i := range retry {
		u := units[i]
		if fn {
			cmds[i] = pipe.FCall(ctx, s.lib.function(u.log), u.keys, u.args...)
		} else {
			cmds[i] = s.scriptFor(u.log).Eval(ctx, pipe, u.keys, u.args...)
		}
	}
	_, _ = pipe.Exec(ctx)
	for _, i := range retry {
		units[i].split(cmds[i].Result())
	}
}
