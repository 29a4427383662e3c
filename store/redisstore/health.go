package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/store"
)

// An outage ends by itself, a misconfiguration never does, though both
// fail every decision: a standalone client on a Redis Cluster node gets
// MOVED or CROSSSLOT, one on a replica READONLY, one with wrong
// credentials NOAUTH or WRONGPASS. Those answers, and what INFO says,
// make errors that wrap store.ErrMisconfigured and name the fix.

// misconfigError is a Redis that cannot serve in the client's mode; its
// message names the fix.
type misconfigError struct{ msg string }

func (e *misconfigError) Error() string { return e.msg }
func (e *misconfigError) Unwrap() error { return store.ErrMisconfigured }

// addr is the address of a standalone client's server, for messages.
func (s *Store) addr() string {
	if c, ok := s.client.(*redis.Client); ok && s.cfg.Mode == ModeStandalone {
		return c.Options().Addr
	}
	return "the Redis server"
}

// CheckServer asks Redis whether it can decide in the client's mode. A
// standalone or sentinel client must not reach a Redis Cluster node, a
// standalone client not a replica (INFO cluster, INFO replication); a
// cluster client must reach a cluster. It returns nil when Redis answers
// and fits, an error wrapping store.ErrMisconfigured that names the fix
// when it does not, and an error wrapping store.ErrUnavailable when Redis
// did not answer. A Redis that refuses INFO (an ACL, a renamed command) is
// only pinged. ctx bounds the call (Ping bounds it by Config.Timeout).
func (s *Store) CheckServer(ctx context.Context) error {
	if err := s.checkServer(ctx, true); err != nil {
		return s.wrap(ctx, "check", err)
	}
	return nil
}

// checkServer is CheckServer; scripting false skips the scripting probe
// (a cluster client's masters are only pinged).
func (s *Store) checkServer(ctx context.Context, scripting bool) error {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		})
	}
	info := s.client.InfoMap(ctx, "replication", "cluster")
	if err := info.Err(); err != nil {
		if _, ok := errors.AsType[redis.Error](err); !ok || (s.misconfigured(err) != "" && !redis.HasErrorPrefix(err, "NOPERM")) {
			return err
		}
		// INFO refused (ACL, renamed command): nothing to check but PING.
		if err := s.client.Ping(ctx).Err(); err != nil {
			return err
		}
	} else if info.Item("Cluster", "cluster_enabled") == "1" {
		return &misconfigError{fmt.Sprintf("%s is a Redis Cluster node (INFO: cluster_enabled:1), but --redis-mode is %s: run floodgate with --redis-mode cluster", s.addr(), s.cfg.Mode)}
	} else if s.cfg.Mode == ModeStandalone && info.Item("Replication", "role") == "slave" {
		master := net.JoinHostPort(info.Item("Replication", "master_host"), info.Item("Replication", "master_port"))
		return &misconfigError{fmt.Sprintf("%s is a read-only replica of %s (INFO: role:slave): point --redis-url at the master (%s), or use --redis-mode sentinel", s.addr(), master, master)}
	}
	if !scripting {
		return nil
	}
	// The scripting probe touches no key and answers "OK" (loading the
	// library if Redis lacks it): NOPERM (an ACL that forbids the
	// functions) and a Redis without functions are misconfigurations; the
	// probe answers no error, so health checks leave INFO errorstats alone.
	_, err := s.fcall(ctx, s.lib.probe, nil)
	if _, ok := errors.AsType[*misconfigError](err); ok || redis.HasErrorPrefix(err, "NOPERM") {
		return err
	}
	return nil
}

// Ping implements store.Store: CheckServer, within Config.Timeout. It
// fails (with store.ErrMisconfigured) on a Redis that answers PING but
// cannot decide in the client's mode. The scripting probe runs on the
// first Ping and on the first after a failed one (a restarted Redis, a
// changed ACL), not on every health check.
func (s *Store) Ping(ctx context.Context) error {
	tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	scripting := !s.scripted.Load()
	if err := s.checkServer(tctx, scripting); err != nil {
		s.scripted.Store(false)
		return s.wrap(ctx, "ping", err)
	}
	if scripting {
		s.scripted.Store(true)
	}
	return nil
}

// misconfigured is the fix for err when err means Redis cannot decide in
// the client's mode, whatever happens next, and "" when it does not:
// refused credentials or rights (NOAUTH, WRONGPASS, NOPERM); a cluster
// client on a server without cluster support; READONLY reaching a
// standalone client (under Sentinel a replica answers it for a moment
// during a failover); cluster redirections and slot errors reaching a
// standalone or sentinel client.
func (s *Store) misconfigured(err error) string {
	cluster := s.cfg.Mode == ModeCluster
	switch {
	case redis.HasErrorPrefix(err, "NOAUTH"):
		return s.addr() + " needs a password: put it in --redis-password-file (or in --redis-url, set by $FLOODGATE_REDIS_URL)"
	case redis.HasErrorPrefix(err, "WRONGPASS"):
		return s.addr() + " refused the user name or password: fix the password in --redis-password-file (or --redis-url) and the user in --redis-url"
	case redis.HasErrorPrefix(err, "NOPERM"):
		return s.addr() + " refused a command or key to floodgate's Redis user: grant it scripts and the keys under --redis-prefix (ACL SETUSER <user> +@scripting +ping +info ~<prefix>*)"
	case cluster && strings.Contains(err.Error(), "cluster support disabled"):
		return "Redis is not a Redis Cluster: run floodgate with --redis-mode standalone (or sentinel)"
	case s.cfg.Mode == ModeStandalone && redis.HasErrorPrefix(err, "READONLY"):
		return s.addr() + " is a read-only replica: point --redis-url at its master, or use --redis-mode sentinel"
	case !cluster && hasPrefix(err, "MOVED", "ASK", "CROSSSLOT", "CLUSTERDOWN"):
		return s.addr() + " is a Redis Cluster node: run floodgate with --redis-mode cluster"
	}
	return ""
}

// hasPrefix reports whether err is a Redis answer starting with one of
// prefixes.
func hasPrefix(err error, prefixes ...string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return redis.HasErrorPrefix(err, p) })
}

// wrap labels err from op. Answers that mean a misconfiguration wrap
// store.ErrMisconfigured (with the fix), errors that mean Redis could not
// be reached in time wrap store.ErrUnavailable. A cancelled parent context
// is reported as itself.
func (s *Store) wrap(parent context.Context, op string, err error) error {
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("redisstore: %s: %w", op, perr)
	}
	if _, ok := errors.AsType[*misconfigError](err); ok {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	if fix := s.misconfigured(err); fix != "" {
		return fmt.Errorf("redisstore: %s: %w: %s (Redis answered %q)", op, store.ErrMisconfigured, fix, err.Error())
	}
	if unavailable(err) {
		return fmt.Errorf("redisstore: %s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("redisstore: %s: %w", op, err)
}
