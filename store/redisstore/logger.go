package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// Logger writes go-redis' own log lines (a dial that failed, a sentinel
// that switched masters) to a slog.Logger, at WARN with msg "go-redis",
// so that they follow the server's format (--log-format json) instead of
// go-redis' plain "redis: …" lines on stderr. Install it with
// redis.SetLogger(redisstore.Logger{Log: log}); see that call for why it is
// process-wide.
type Logger struct {
	// Log receives the lines; nil means slog.Default().
	Log *slog.Logger
}

// Printf implements go-redis' logging interface.
func (l Logger) Printf(ctx context.Context, format string, v ...any) {
	log := l.Log
	if log == nil {
		log = slog.Default()
	}
	log.WarnContext(ctx, "go-redis", "log", strings.TrimSpace(fmt.Sprintf(format, v...)))
}
