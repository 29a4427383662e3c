package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/store/redisstore"
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
	u, mode, master, err := refRedisURL(r, t)
	if err != nil {
		r.errs = append(r.errs, err.Error())
		return false
	}
	flag(t.flag+"-url", u)
	flag(t.flag+"-mode", mode)
	if master != "" {
		flag(t.flag+"-sentinel-master", master)
	}
	flag(t.flag+"-pool-size", strconv.Itoa(r.integer(t.env+"_POOL_SIZE", 10)))
	return true
}

// refRedisURL is floodgate's --redis-url, --redis-mode and
// --redis-sentinel-master for t, whose URL variable is by TYPE:
//
//	SINGLE    host:port, or a socket path with SOCKET_TYPE=unix
//	CLUSTER   host:port,host:port,...
//	SENTINEL  master,sentinel:port,sentinel:port,...
//
// AUTH is "password" or "user:password". A SINGLE URL may be a redis://
// or rediss:// URL, which takes AUTH (unless it holds a password) and
// TLS as the others do.
func refRedisURL(r *envReader, t refRedisTarget) (u, mode, master string, err error) {
	env := func(name string) string { return t.env + "_" + name }
	socketType, redisType := r.str(env("SOCKET_TYPE"), "unix"), r.str(env("TYPE"), "SINGLE")
	addr, auth := r.str(env("URL"), t.socket), r.getenv(env("AUTH"))
	defer func() {
		if err != nil { // the errors quote URL: a host given as user:password@host:port shows no password
			msg := err.Error()
			for _, h := range strings.Split(addr, ",") {
				msg = redisstore.Redact(msg, h)
			}
			err = errors.New(msg)
		}
	}()
	scheme := "redis"
	if r.boolean(env("TLS"), false) {
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
			return "", fmt.Errorf("$%s=%q names no host", env("URL"), addr)
		}
		q := url.Values{}
		for i, h := range list {
			list[i] = strings.TrimSpace(h)
			if _, _, err := net.SplitHostPort(list[i]); err != nil {
				return "", fmt.Errorf("$%s=%q: %q is not host:port", env("URL"), addr, list[i])
			}
			if i > 0 {
				q.Add("addr", list[i])
			}
		}
		v := url.URL{Scheme: scheme, User: user, Host: list[0], RawQuery: q.Encode()}
		return v.String(), nil
	}
	switch strings.ToLower(redisType) {
	case "single":
		if strings.HasPrefix(addr, "redis://") || strings.HasPrefix(addr, "rediss://") {
			// AUTH and TLS apply to it, as the reference's client applies
			// them whatever the address; a password in the URL stays.
			if v, perr := url.Parse(addr); perr == nil { // else --redis-url's check says what is wrong
				if _, has := v.User.Password(); user != nil && !has {
					v.User = user
				}
				if scheme == "rediss" {
					v.Scheme = scheme
				}
				addr = v.String()
			}
			return addr, "standalone", "", nil
		}
		switch strings.ToLower(socketType) {
		case "unix":
			if addr == "" {
				return "", "", "", fmt.Errorf("$%s is empty", env("URL"))
			}
			v := url.URL{Scheme: "unix", User: user, Path: addr}
			return v.String(), "standalone", "", nil
		case "tcp":
			u, err = hosts([]string{addr})
			return u, "standalone", "", err
		default:
			return "", "", "", fmt.Errorf("$%s=%q: tcp or unix", env("SOCKET_TYPE"), socketType)
		}
	case "cluster":
		u, err = hosts(strings.Split(addr, ","))
		return u, "cluster", "", err
	case "sentinel":
		parts := strings.Split(addr, ",")
		if len(parts) < 2 || parts[0] == "" {
			return "", "", "", fmt.Errorf("$%s=%q: sentinel needs <master name>,<sentinel1>,...,<sentinelN>", env("URL"), addr)
		}
		u, err = hosts(parts[1:])
		return u, "sentinel", parts[0], err
	default:
		return "", "", "", fmt.Errorf("$%s=%q: single, cluster or sentinel", env("TYPE"), redisType)
	}
}

// refVariables are reference variables floodgate does not act on, and
// why. Those of kind onTrue are reported only when set to true (false
// asks for what floodgate does anyway); the others whenever set.
type refVariables struct {
	why    string
	onTrue bool
	names  []string
}

// refUnsupportedVars are the reference's variables that change nothing
// here. Every other reference variable is mapped by translateReference.
var refUnsupportedVars = []refVariables{
	{why: "gRPC listens on TCP only (GRPC_HOST:GRPC_PORT)", names: []string{"GRPC_UDS"}},
	{why: "connections are not aged out", names: []string{"GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE"}},
	{why: "mTLS checks the client CA (GRPC_CLIENT_TLS_CACERT), not a SAN", names: []string{"GRPC_CLIENT_TLS_SAN"}},
	{why: "xDS: the server always starts before the first config arrives", onTrue: true, names: []string{"FORCE_START_WITHOUT_INITIAL_CONFIG"}},
	{why: "xDS: node metadata is not sent", names: []string{"CONFIG_GRPC_XDS_NODE_METADATA"}},
	{why: "xDS: no extra request headers", names: []string{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"}},
	{why: "xDS: the server's certificate is checked by its CA and host name", names: []string{"CONFIG_GRPC_XDS_SERVER_TLS_SAN"}},
	{why: "xDS: reconnection backoff is floodgate's", names: []string{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "XDS_CLIENT_BACKOFF_JITTER"}},
	{why: "xDS: the gRPC default message size", names: []string{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"}},
	{why: "no statsd; Prometheus metrics at /metrics on the HTTP port", onTrue: true, names: []string{"USE_STATSD"}},
	{why: "no statsd", names: []string{"STATSD_HOST", "STATSD_PORT"}},
	{why: "no DogStatsD", onTrue: true, names: []string{"USE_DOG_STATSD"}},
	{why: "no DogStatsD", names: []string{"USE_DOG_STATSD_MOGRIFIERS"}},
	{why: "no statsd tags", names: []string{"EXTRA_TAGS"}},
	{why: "Prometheus is scraped, not flushed", names: []string{"STATS_FLUSH_INTERVAL"}},
	{why: "metrics are always served", onTrue: true, names: []string{"DISABLE_STATS"}},
	{why: "metrics are on the HTTP port (HOST:PORT/metrics), not a port of their own", names: []string{"PROMETHEUS_ADDR"}},
	{why: "metrics are at /metrics", names: []string{"PROMETHEUS_PATH"}},
	{why: "metric names are floodgate's (floodgate_*), no statsd mapping", names: []string{"PROMETHEUS_MAPPER_YAML"}},
	{why: "durations are in seconds, as Prometheus names them", onTrue: true, names: []string{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"}},
	{why: "files and folders whose names start with '.' are always skipped", names: []string{"RUNTIME_IGNOREDOTFILES"}},
	{why: "the config folder is always watched, ConfigMap symlink swaps included", names: []string{"RUNTIME_WATCH_ROOT"}},
	{why: "keys expire with their window, no jitter", names: []string{"EXPIRATION_JITTER_MAX_SECONDS"}},
	{why: "floodgate_near_limit_total counts at its own threshold (80%, the reference's default)", names: []string{"NEAR_LIMIT_RATIO"}},
	{why: "health is SERVING once serving; /readyz reports the store", onTrue: true, names: []string{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"}},
	{why: "no effect in the reference either", names: []string{"REDIS_PIPELINE_LIMIT", "REDIS_PERSECOND_PIPELINE_LIMIT"}},
	{why: "cluster pipelines always run one per node, in parallel", names: []string{"REDIS_CLUSTER_PIPELINE_PARALLELISM", "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM"}},
	{why: "sentinels are reached without a password", names: []string{"REDIS_SENTINEL_AUTH", "REDIS_PERSECOND_SENTINEL_AUTH"}},
	{why: "Redis' certificate is always verified (name REDIS_TLS_CACERT for a private CA)", onTrue: true, names: []string{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"}},
	{why: "the floodgate.store health service always reports Redis", onTrue: true, names: []string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION"}},
	{why: "calls wait for a connection, within --redis-timeout", names: []string{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR"}},
	{why: "the server starts without Redis and answers by failure modes until it answers",
		names: []string{"REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME"}},
	{why: "the per-second Redis batches as the main one (REDIS_PIPELINE_WINDOW)", names: []string{"REDIS_PERSECOND_PIPELINE_WINDOW"}},
	{why: "the per-second Redis has the main one's timeout (REDIS_TIMEOUT)", names: []string{"REDIS_PERSECOND_TIMEOUT"}},
	{why: "no memcached backend", names: []string{"MEMCACHE_HOST_PORT", "MEMCACHE_MAX_IDLE_CONNS", "MEMCACHE_SRV", "MEMCACHE_SRV_REFRESH",
		"MEMCACHE_TLS", "MEMCACHE_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_KEY", "MEMCACHE_TLS_CACERT", "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION"}},
}

// refUnsupported names the unsupported variables that are set, each with
// why it changes nothing.
func refUnsupported(r *envReader) []string {
	var out []string
	for _, v := range refUnsupportedVars {
		for _, name := range v.names {
			b, err := strconv.ParseBool(r.getenv(name))
			if !r.set(name) || (v.onTrue && err == nil && !b) {
				continue
			}
			out = append(out, name+" ("+v.why+")")
		}
	}
	return out
}
