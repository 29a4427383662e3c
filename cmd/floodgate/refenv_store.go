package main

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// refDenyCacheEntryBytes is about what one denied key takes in the deny
// cache, to turn LOCAL_CACHE_SIZE_IN_BYTES into --deny-cache-size.
const refDenyCacheEntryBytes = 256

// refStore maps the reference's backend settings: Redis (its default) as
// REDIS_TYPE, REDIS_SOCKET_TYPE and REDIS_URL say, or the embedded store
// with BACKEND_TYPE=memory (floodgate's own value; the reference has
// none). Memcached is refused.
func refStore(r *envReader, c *refConfig, flag func(name, value string)) {
	switch bt := strings.ToLower(r.str("BACKEND_TYPE", "redis")); bt {
	case "redis":
	case "memory":
		c.notes = append(c.notes, "BACKEND_TYPE=memory: the embedded store (each replica counts apart)")
		return
	default:
		r.errs = append(r.errs, fmt.Sprintf("$BACKEND_TYPE=%q: only redis is supported (or memory, the embedded store)", bt))
		return
	}
	if !refRedis(r, flag, refRedisTarget{env: "REDIS", flag: "redis", socket: "/var/run/nutcracker/ratelimit.sock"}) {
		return
	}
	if r.boolean("REDIS_PERSECOND", false) {
		// The per-second limits' own Redis, read with the reference's defaults.
		refRedis(r, flag, refRedisTarget{env: "REDIS_PERSECOND", flag: "redis-persecond", socket: "/var/run/nutcracker/ratelimitpersecond.sock"})
	}
	if r.boolean("REDIS_TLS", false) {
		flagsOf(r, flag, "REDIS_TLS_CACERT", "redis-tls-ca", "REDIS_TLS_CLIENT_CERT", "redis-tls-cert", "REDIS_TLS_CLIENT_KEY", "redis-tls-key")
	}
	if r.set("REDIS_TIMEOUT") {
		d := r.duration("REDIS_TIMEOUT", 0).String()
		flag("redis-timeout", d)
		flag("redis-dial-timeout", d)
	}
	if w := r.duration("REDIS_PIPELINE_WINDOW", 0); w > 0 {
		flag("redis-batch-max-wait", w.String())
	}
	flagsOf(r, flag, "CACHE_KEY_PREFIX", "redis-prefix")
	n := r.integer("LOCAL_CACHE_SIZE_IN_BYTES", 0)
	switch {
	case n < 0:
		r.errs = append(r.errs, fmt.Sprintf("$LOCAL_CACHE_SIZE_IN_BYTES=%d must not be negative", n))
	case n == 0:
		flag("deny-cache-size", "0")
	default:
		flag("deny-cache-size", strconv.Itoa(max(1, n/refDenyCacheEntryBytes)))
	}
}

// refRedisTarget is one Redis of the reference's environment: the prefix
// of its variables (REDIS, or REDIS_PERSECOND for the per-second limits'
// Redis), the prefix of floodgate's flags for it, and the reference's
// default socket.
type refRedisTarget struct{ env, flag, socket string }

// refRedis maps t's SOCKET_TYPE, TYPE, URL, AUTH, TLS and POOL_SIZE to
// floodgate's flags, with the reference's defaults. It reports false when
// the settings are refused (the reason is in r.errs).
func refRedis(r *envReader, flag func(name, value string), t refRedisTarget) bool {
	env := func(name string) string { return t.env + "_" + name }
	u, mode, master, err := refRedisEnv{
		socketType: r.str(env("SOCKET_TYPE"), "unix"), redisType: r.str(env("TYPE"), "SINGLE"),
		addr: r.str(env("URL"), t.socket), auth: r.str(env("AUTH"), ""), tls: r.boolean(env("TLS"), false),
	}.flags()
	if err != nil {
		r.errs = append(r.errs, strings.ReplaceAll(err.Error(), "$REDIS_", "$"+t.env+"_"))
		return false
	}
	flag(t.flag+"-url", u)
	flag(t.flag+"-mode", mode)
	if master != "" {
		flag(t.flag+"-sentinel-master", master)
	}
	flag(t.flag+"-pool-size", strconv.Itoa(r.integer(env("POOL_SIZE"), 10)))
	return true
}

// refRedisEnv is one Redis's settings in the reference's environment:
// REDIS_SOCKET_TYPE, REDIS_TYPE, REDIS_URL (addr), REDIS_AUTH ("password"
// or "user:password") and REDIS_TLS.
type refRedisEnv struct {
	socketType, redisType, addr, auth string
	tls                               bool
}

// flags are floodgate's --redis-url, --redis-mode and
// --redis-sentinel-master for e, by REDIS_TYPE:
//
//	SINGLE    host:port, or a socket path with REDIS_SOCKET_TYPE=unix
//	CLUSTER   host:port,host:port,...
//	SENTINEL  master,sentinel:port,sentinel:port,...
func (e refRedisEnv) flags() (u, mode, master string, err error) {
	socketType, redisType, addr, auth, tls := e.socketType, e.redisType, e.addr, e.auth, e.tls
	scheme := "redis"
	if tls {
		scheme = "rediss"
	}
	var user *url.Userinfo
	if auth != "" {
		if name, pass, ok := strings.Cut(auth, ":"); ok {
			user = url.UserPassword(name, pass)
		} else {
			user = url.UserPassword("", auth)
		}
	}
	hosts := func(list []string) (string, error) {
		if len(list) == 0 || list[0] == "" {
			return "", fmt.Errorf("$REDIS_URL=%q names no host", addr)
		}
		q := url.Values{}
		for i, h := range list {
			list[i] = strings.TrimSpace(h)
			if _, _, err := net.SplitHostPort(list[i]); err != nil {
				return "", fmt.Errorf("$REDIS_URL=%q: %q is not host:port", addr, list[i])
			}
			if i > 0 {
				q.Add("addr", list[i])
			}
		}
		v := url.URL{Scheme: scheme, User: user, Host: list[0], RawQuery: q.Encode()}
		return v.String(), nil
	}
	switch t := strings.ToLower(redisType); t {
	case "single", "":
		if strings.HasPrefix(addr, "redis://") || strings.HasPrefix(addr, "rediss://") {
			return addr, "standalone", "", nil
		}
		switch st := strings.ToLower(socketType); st {
		case "unix":
			if addr == "" {
				return "", "", "", fmt.Errorf("$REDIS_URL is empty")
			}
			v := url.URL{Scheme: "unix", User: user, Path: addr}
			return v.String(), "standalone", "", nil
		case "tcp":
			u, err = hosts([]string{addr})
			return u, "standalone", "", err
		default:
			return "", "", "", fmt.Errorf("$REDIS_SOCKET_TYPE=%q: tcp or unix", socketType)
		}
	case "cluster":
		u, err = hosts(strings.Split(addr, ","))
		return u, "cluster", "", err
	case "sentinel":
		parts := strings.Split(addr, ",")
		if len(parts) < 2 || parts[0] == "" {
			return "", "", "", fmt.Errorf("$REDIS_URL=%q: sentinel needs <master name>,<sentinel1>,...,<sentinelN>", addr)
		}
		u, err = hosts(parts[1:])
		return u, "sentinel", parts[0], err
	default:
		return "", "", "", fmt.Errorf("$REDIS_TYPE=%q: single, cluster or sentinel", redisType)
	}
}

// refVariable is a reference variable floodgate does not act on, and why.
// Those of kind onTrue are reported only when set to true (false asks
// for what floodgate does anyway); the others whenever set.
type refVariable struct {
	name, why string
	onTrue    bool
}

// refUnsupportedVars are the reference's variables that change nothing
// here. Every other reference variable is mapped by translateReference.
var refUnsupportedVars = []refVariable{
	{name: "GRPC_UDS", why: "gRPC listens on TCP only (GRPC_HOST:GRPC_PORT)"},
	{name: "GRPC_MAX_CONNECTION_AGE", why: "connections are not aged out"},
	{name: "GRPC_MAX_CONNECTION_AGE_GRACE", why: "connections are not aged out"},
	{name: "GRPC_CLIENT_TLS_SAN", why: "mTLS checks the client CA (GRPC_CLIENT_TLS_CACERT), not a SAN"},
	{name: "FORCE_START_WITHOUT_INITIAL_CONFIG", why: "xDS: the server always starts before the first config arrives", onTrue: true},
	{name: "CONFIG_GRPC_XDS_NODE_METADATA", why: "xDS: node metadata is not sent"},
	{name: "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", why: "xDS: no extra request headers"},
	{name: "CONFIG_GRPC_XDS_SERVER_TLS_SAN", why: "xDS: the server's certificate is checked by its CA and host name"},
	{name: "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", why: "xDS: reconnection backoff is floodgate's"},
	{name: "XDS_CLIENT_BACKOFF_JITTER", why: "xDS: reconnection backoff is floodgate's"},
	{name: "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", why: "xDS: the gRPC default message size"},
	{name: "USE_STATSD", why: "no statsd; Prometheus metrics at /metrics on the HTTP port", onTrue: true},
	{name: "STATSD_HOST", why: "no statsd"},
	{name: "STATSD_PORT", why: "no statsd"},
	{name: "USE_DOG_STATSD", why: "no DogStatsD", onTrue: true},
	{name: "USE_DOG_STATSD_MOGRIFIERS", why: "no DogStatsD"},
	{name: "EXTRA_TAGS", why: "no statsd tags"},
	{name: "STATS_FLUSH_INTERVAL", why: "Prometheus is scraped, not flushed"},
	{name: "DISABLE_STATS", why: "metrics are always served", onTrue: true},
	{name: "PROMETHEUS_ADDR", why: "metrics are on the HTTP port (HOST:PORT/metrics), not a port of their own"},
	{name: "PROMETHEUS_PATH", why: "metrics are at /metrics"},
	{name: "PROMETHEUS_MAPPER_YAML", why: "metric names are floodgate's (floodgate_*), no statsd mapping"},
	{name: "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", why: "durations are in seconds, as Prometheus names them", onTrue: true},
	{name: "RUNTIME_IGNOREDOTFILES", why: "files and folders whose names start with '.' are always skipped"},
	{name: "RUNTIME_WATCH_ROOT", why: "the config folder is always watched, ConfigMap symlink swaps included"},
	{name: "EXPIRATION_JITTER_MAX_SECONDS", why: "keys expire with their window, no jitter"},
	{name: "NEAR_LIMIT_RATIO", why: "floodgate_near_limit_total counts at its own threshold (80%, the reference's default)"},
	{name: "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", why: "health is SERVING once serving; /readyz reports the store", onTrue: true},
	{name: "REDIS_PIPELINE_LIMIT", why: "no effect in the reference either"},
	{name: "REDIS_CLUSTER_PIPELINE_PARALLELISM", why: "cluster pipelines always run one per node, in parallel"},
	{name: "REDIS_SENTINEL_AUTH", why: "sentinels are reached without a password"},
	{name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", why: "Redis' certificate is always verified (name REDIS_TLS_CACERT for a private CA)", onTrue: true},
	{name: "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", why: "the floodgate.store health service always reports Redis", onTrue: true},
	{name: "REDIS_POOL_ON_EMPTY_BEHAVIOR", why: "calls wait for a connection, within --redis-timeout"},
	{name: "REDIS_STARTUP_INITIAL_INTERVAL", why: "the server starts without Redis and answers by failure modes until it answers"},
	{name: "REDIS_STARTUP_MAX_INTERVAL", why: "the server starts without Redis and answers by failure modes until it answers"},
	{name: "REDIS_STARTUP_MAX_ELAPSED_TIME", why: "the server starts without Redis and answers by failure modes until it answers"},
	{name: "REDIS_PERSECOND_SENTINEL_AUTH", why: "sentinels are reached without a password"},
	{name: "REDIS_PERSECOND_PIPELINE_WINDOW", why: "the per-second Redis batches as the main one (REDIS_PIPELINE_WINDOW)"},
	{name: "REDIS_PERSECOND_PIPELINE_LIMIT", why: "no effect in the reference either"},
	{name: "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", why: "cluster pipelines always run one per node, in parallel"},
	{name: "REDIS_PERSECOND_TIMEOUT", why: "the per-second Redis has the main one's timeout (REDIS_TIMEOUT)"},
	{name: "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", why: "calls wait for a connection, within --redis-timeout"},
	{name: "MEMCACHE_HOST_PORT", why: "no memcached backend"},
	{name: "MEMCACHE_MAX_IDLE_CONNS", why: "no memcached backend"},
	{name: "MEMCACHE_SRV", why: "no memcached backend"},
	{name: "MEMCACHE_SRV_REFRESH", why: "no memcached backend"},
	{name: "MEMCACHE_TLS", why: "no memcached backend"},
	{name: "MEMCACHE_TLS_CLIENT_CERT", why: "no memcached backend"},
	{name: "MEMCACHE_TLS_CLIENT_KEY", why: "no memcached backend"},
	{name: "MEMCACHE_TLS_CACERT", why: "no memcached backend"},
	{name: "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", why: "no memcached backend"},
}

// refUnsupported names the unsupported variables that are set, each with
// why it changes nothing.
func refUnsupported(r *envReader) []string {
	var out []string
	for _, v := range refUnsupportedVars {
		if !r.set(v.name) {
			continue
		}
		if v.onTrue {
			if b, err := strconv.ParseBool(r.getenv(v.name)); err == nil && !b {
				continue
			}
		}
		out = append(out, v.name+" ("+v.why+")")
	}
	return out
}
