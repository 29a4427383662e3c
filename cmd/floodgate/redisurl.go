package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// redisURLForms is what --redis-url's errors say it takes.
const redisURLForms = "want redis://[user:pass@]host:port[/db], rediss:// (TLS), unix:///path/to/redis.sock, or a bare host:port such as 127.0.0.1:6379"

// redisURLOf is the URL --redis-url's value s stands for: a URL as it is
// (empty too), or a bare host:port, as other rate limiters take it, as
// redis://host:port. Anything else is an error naming the flag, the value
// (its password, if any, masked) and the forms wanted.
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
	shown := s
	if i := strings.LastIndex(s, "@"); i >= 0 {
		shown = "xxxxx" + s[i:]
	}
	return "", fmt.Errorf("--redis-url %q: %s", shown, redisURLForms)
}
