package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/store/redisstore"
)

// redisURLForms is what the Redis URL flags' errors say they take.
const redisURLForms = "want redis://[user:pass@]host:port[/db], rediss:// (TLS), unix:///path/to/redis.sock, or a bare host:port such as 127.0.0.1:6379"

// resolveRedisURLs makes the URL of --redis-url and of
// --redis-persecond-url the URL every Redis client of serve takes
// (redisURLOf: a bare host:port becomes redis://host:port) and checks it
// as the Redis client will read it for its mode (checkRedisURL), so that
// a bad value stops serve before anything starts. Its errors start with
// where the value came from: the flag, or its variable
// ($FLOODGATE_REDIS_URL) when the environment gave it.
func (f *serveFlags) resolveRedisURLs(fs *pflag.FlagSet, getenv func(string) string) error {
	for _, r := range []struct {
		flag string
		c    *redisstore.ClientConfig
	}{{"redis-url", &f.redisConn}, {"redis-persecond-url", &f.redisPerSecond}} {
		v := r.c.URL
		u, err := redisURLOf(v)
		if err == nil && u != "" {
			err = checkRedisURL(u, r.c.Mode)
		}
		if err == nil {
			r.c.URL = u
			continue
		}
		name, sep := "--"+r.flag, " "
		if !fs.Changed(r.flag) && getenv(envName(r.flag)) != "" {
			name, sep = "$"+envName(r.flag), "=" // as parseFlags names variables
		}
		msg := fmt.Sprintf("%s: %s; %s", name, err, redisURLForms)
		if !errors.Is(err, redisstore.ErrClientConfig) { // the client's errors show the URL, its password masked
			msg = fmt.Sprintf("%s%s%q: %s; %s", name, sep, redisstore.Redact(v, v), err, redisURLForms)
		}
		return errors.New(redisstore.Redact(msg, v)) // wherever else the value or the parser repeats it
	}
	return nil
}

// redisURLOf is the URL --redis-url's value s stands for: a URL as it is
// (empty too), or a bare host:port, as other rate limiters take it, as
// redis://host:port. Anything else is an error (without the value: its
// callers name it).
func redisURLOf(s string) (string, error) {
	if s == "" || strings.Contains(s, "://") {
		return s, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err == nil && host != "" && !strings.ContainsAny(host, "@/") {
		if n, perr := strconv.Atoi(port); perr == nil && n > 0 && n <= 65535 {
			return "redis://" + s, nil
		}
	}
	return "", errors.New("not a URL, nor a host:port")
}

// checkRedisURL reads URL s as the Redis store's client will in mode:
// redisstore.NewClient, which does not connect. Only the URL is checked
// here: a mode of no known name is read as standalone and the sentinel
// master's name is given, for the store to refuse when it opens.
func checkRedisURL(s, mode string) error {
	cfg := redisstore.ClientConfig{URL: s, Mode: mode, SentinelMaster: "master"}
	if mode != redisstore.ModeCluster && mode != redisstore.ModeSentinel {
		cfg.Mode = redisstore.ModeStandalone
	}
	c, err := redisstore.NewClient(cfg)
	if err != nil {
		return err
	}
	return c.Close()
}
