package redisstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Modes of ClientConfig.Mode.
const (
	ModeStandalone = "standalone"
	ModeCluster    = "cluster"
	ModeSentinel   = "sentinel"
)

// ClientConfig describes how to reach Redis: the --redis-* flags and
// FLOODGATE_REDIS_* variables. Zero durations and sizes keep go-redis'
// defaults.
type ClientConfig struct {
	// URL is redis://[user:pass@]host:port[/db], or rediss:// for TLS, or
	// unix://[user:pass@]/path/to/socket (standalone).
	//   standalone: the server.
	//   cluster: any nodes, as go-redis' ParseClusterURL reads them:
	//     redis://host:p1?addr=host:p2&addr=host:p3
	//   sentinel: the sentinels, the host plus addr= parameters the same
	//     way; user and password (and TLS) are the master's.
	URL string
	// Password, when set, replaces the URL's password (the user name
	// stays the URL's), so that the URL, which a command line or a config
	// may show, need not hold it.
	Password string
	// Mode is standalone (the default when empty), cluster or sentinel.
	Mode string
	// SentinelMaster is the master's name; required in sentinel mode.
	SentinelMaster string
	// PoolSize is the connection pool size (per node in a cluster).
	PoolSize int
	// TLSCAFile, when set, is a PEM file of the CAs that sign the Redis
	// server's certificate (for a private CA); TLSCertFile and TLSKeyFile,
	// when set, are the client certificate Redis asks for (tls-auth-clients).
	// All need a rediss:// URL.
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// DialTimeout, ReadTimeout and WriteTimeout bound each connection
	// operation.
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
}

// ErrClientConfig is wrapped by NewClient's errors.
var ErrClientConfig = errors.New("bad redis client config")

// NewClient builds a go-redis client from cfg: a *redis.Client
// (standalone), *redis.ClusterClient (cluster) or failover *redis.Client
// (sentinel), which sends no command again after a failure unless the
// URL's max_retries says so. It does not connect; the first command
// does. Errors never contain the URL's password, nor a part of it.
func NewClient(cfg ClientConfig) (redis.UniversalClient, error) {
	if cfg.URL == "" {
		return nil, bad("empty redis URL")
	}
	if cfg.PoolSize < 0 || cfg.DialTimeout < 0 || cfg.ReadTimeout < 0 || cfg.WriteTimeout < 0 {
		return nil, bad("pool size and timeouts must not be negative")
	}
	u, err := url.Parse(cfg.URL)
	if misread(cfg.URL) {
		return nil, bad("redis URL %s: an @ after a /, ? or # (write a password's /, ? and # as %%2F, %%3F and %%23, another @ as %%40)", Redact(cfg.URL, cfg.URL))
	}
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, bad("%s", Redact(fmt.Sprintf("redis URL %s: %v", cfg.URL, err), cfg.URL))
	}
	shown := u.Redacted() // the URL as given, its password masked
	switch {
	case u.Scheme == "unix":
		// A socket path (unix:///run/redis.sock), standalone only.
		if u.Path == "" || (cfg.Mode != "" && cfg.Mode != ModeStandalone) {
			return nil, bad("redis URL %s: a unix socket needs a path and mode standalone", shown)
		}
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return nil, bad("redis URL %s: scheme must be redis, rediss or unix, got %q", shown, u.Scheme)
	case u.Host == "":
		return nil, bad("redis URL %s: no host", shown)
	}
	if (cfg.TLSCAFile != "" || cfg.TLSCertFile != "" || cfg.TLSKeyFile != "") && u.Scheme != "rediss" {
		return nil, bad("redis URL %s: TLS files need a rediss:// URL", shown)
	}
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return nil, bad("a Redis client certificate needs both its certificate and its key file")
	}
	// What cfg sets becomes the URL's own parameters (the password its
	// user information), which each mode's go-redis parser reads.
	q := u.Query()
	if cfg.PoolSize > 0 {
		q.Set("pool_size", strconv.Itoa(cfg.PoolSize))
	}
	for name, d := range map[string]time.Duration{"dial_timeout": cfg.DialTimeout, "read_timeout": cfg.ReadTimeout, "write_timeout": cfg.WriteTimeout} {
		if d > 0 {
			q.Set(name, d.String())
		}
	}
	if !q.Has("max_retries") {
		// No command is sent again after its reply timed out: Redis may
		// still run the first, and a decision run twice charges (or
		// refunds) twice.
		q.Set("max_retries", "-1")
	}
	u.RawQuery = q.Encode()
	if cfg.Password != "" {
		u.User = url.UserPassword(u.User.Username(), cfg.Password)
	}
	raw := u.String()
	switch mode := cfg.Mode; mode {
	case "", ModeStandalone:
		if u.Query().Has("addr") {
			return nil, bad("redis URL %s: addr= parameters need mode cluster or sentinel", shown)
		}
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, bad("redis URL %s: %v", shown, scrub(err, u))
		}
		if err := setTLS(o.TLSConfig, cfg); err != nil {
			return nil, err
		}
		return redis.NewClient(o), nil
	case ModeCluster:
		o, err := redis.ParseClusterURL(raw)
		if err != nil {
			return nil, bad("redis cluster URL %s: %v", shown, scrub(err, u))
		}
		if err := setTLS(o.TLSConfig, cfg); err != nil {
			return nil, err
		}
		return redis.NewClusterClient(o), nil
	case ModeSentinel:
		if cfg.SentinelMaster == "" {
			return nil, bad("sentinel mode needs a sentinel master name")
		}
		fo, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return nil, bad("redis sentinel URL %s: %v", shown, scrub(err, u))
		}
		if fo.RouteByLatency || fo.RouteRandomly { // NewFailoverClient panics on them
			return nil, bad("redis sentinel URL %s: route_by_latency and route_randomly need a failover cluster client", shown)
		}
		// The URL's user and password are the master's, as in the other
		// modes; the sentinels are reached without.
		fo.MasterName = cfg.SentinelMaster
		fo.Username, fo.Password = fo.SentinelUsername, fo.SentinelPassword
		fo.SentinelUsername, fo.SentinelPassword = "", ""
		if err := setTLS(fo.TLSConfig, cfg); err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(fo), nil
	default:
		return nil, bad("redis mode %q: want standalone, cluster or sentinel", mode)
	}
}

// setTLS adds cfg's CA and client certificate to tc, the TLS config a
// rediss:// URL gave (nil for redis://, where NewClient refused TLS files).
func setTLS(tc *tls.Config, cfg ClientConfig) error {
	if tc == nil {
		return nil
	}
	if cfg.TLSCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSCAFile)
		if err != nil {
			return bad("redis TLS CA: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return bad("redis TLS CA %s: no PEM certificate in it", cfg.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return bad("redis TLS client certificate: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return nil
}

// bad is a NewClient error: it wraps ErrClientConfig.
func bad(format string, args ...any) error {
	return fmt.Errorf("redisstore: %w: %s", ErrClientConfig, fmt.Sprintf(format, args...))
}

// Redact returns text with the password of raw, a Redis URL or host:port
// that need not parse, replaced by xxxxx wherever it occurs. The password
// is what follows the user's name and ":" in raw's user information
// (before its last "@"), or all of it when there is no ":" (a password
// alone, as Redis' AUTH takes it, is the usual mistake).
func Redact(text, raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return text
	}
	info := raw[:at]
	if i := strings.Index(info, "://"); i >= 0 {
		info = info[i+len("://"):]
	}
	if _, p, found := strings.Cut(info, ":"); found {
		info = p
	}
	if info == "" {
		return text
	}
	return strings.ReplaceAll(text, info, "xxxxx")
}

// misread reports whether raw holds an @ after a /, ? or # (past its
// scheme, unless a socket path follows the scheme): a password's /, ? or #
// written as it is ends the user information early, and the URL parser
// reads the password's rest as the port, path, query or fragment, which
// its errors and go-redis' would quote.
func misread(raw string) bool {
	_, rest, ok := strings.Cut(raw, "://")
	at := strings.LastIndex(rest, "@")
	return ok && at > 0 && !strings.HasPrefix(rest, "/") && strings.ContainsAny(rest[:at], "/?#")
}

// scrub removes u's password from err's text, should go-redis quote it.
func scrub(err error, u *url.URL) string {
	msg := err.Error()
	if p, ok := u.User.Password(); ok && p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return msg
}
