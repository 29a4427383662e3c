package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"
)

// redisURLForms is what --redis-url's errors say it takes.
const redisURLForms = "want redis://[user:pass@]host:port[/db], rediss:// (TLS), unix:///path/to/redis.sock, or a bare host:port such as 127.0.0.1:6379"

// resolveRedisURL makes f.redisConn.URL the URL every Redis client of serve
// takes (redisURLOf: a bare host:port becomes redis://host:port) and
// checks it as the Redis client's own parser will read it for
// --redis-mode, so that a bad value stops serve before anything starts.
// Its errors start with where the value came from: --redis-url, or
// $FLOODGATE_REDIS_URL when the environment gave it.
func (f *serveFlags) resolveRedisURL(fs *pflag.FlagSet, getenv func(string) string) error {
	u, err := redisURLOf(f.redisConn.URL)
	if err == nil && u != "" {
		err = parseRedisURL(u, f.redisConn.Mode)
	}
	if err == nil {
		f.redisConn.URL = u
		return nil
	}
	shown := fmt.Sprintf("--redis-url %q", redactURL(f.redisConn.URL))
	if !fs.Changed("redis-url") && getenv(envName("redis-url")) != "" {
		shown = fmt.Sprintf("$%s=%q", envName("redis-url"), redactURL(f.redisConn.URL)) // as parseFlags names variables
	}
	msg := fmt.Sprintf("%s: %s; %s", shown, err, redisURLForms)
	if p := passwordOf(f.redisConn.URL); p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx") // wherever else the value or the parser repeats it
	}
	return errors.New(msg)
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

// parseRedisURL reads the URL s as the Redis client will for mode: go-redis'
// ParseURL (standalone, and sentinel once its addr= parameters, the other
// sentinels, are set aside) or ParseClusterURL. A unix:// socket is left
// to the store, which says what is wrong with it.
func parseRedisURL(s, mode string) error {
	u, err := url.Parse(s)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return err
	}
	if u.Scheme == "unix" {
		return nil
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	switch mode {
	case "cluster":
		_, err = redis.ParseClusterURL(s)
	case "sentinel":
		q := u.Query()
		q.Del("addr")
		u.RawQuery = q.Encode()
		_, err = redis.ParseURL(u.String())
	default: // standalone; a mode of no known name is refused by the store
		_, err = redis.ParseURL(s)
	}
	return err
}

// userInfo returns the user information of URL or host:port s (before its
// last "@"), and where it starts; ok is false when s has none.
func userInfo(s string) (info string, start int, ok bool) {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return "", 0, false
	}
	if i := strings.Index(s, "://"); i >= 0 && i < at {
		start = i + len("://")
	}
	return s[start:at], start, true
}

// passwordOf is the password in s's user information: after the user's
// name and ":", or all of it when there is no ":" (a password alone, as
// Redis' AUTH takes it, is the usual mistake).
func passwordOf(s string) string {
	info, _, ok := userInfo(s)
	if !ok {
		return ""
	}
	if _, p, found := strings.Cut(info, ":"); found {
		return p
	}
	return info
}

// redactURL is s with its password masked (xxxxx), to be shown in errors.
func redactURL(s string) string {
	info, start, ok := userInfo(s)
	if !ok {
		return s
	}
	masked := "xxxxx"
	if user, _, found := strings.Cut(info, ":"); found {
		masked = user + ":xxxxx"
	}
	return s[:start] + masked + s[start+len(info):]
}
