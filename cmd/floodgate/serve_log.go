package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/floodgate/floodgate/internal/observability"
)

// newLogger returns serve's logger: level is debug (request logs on both
// APIs), info, warn or error; format is text or json. In JSON a duration
// is written as a string ("10s", "250ms"), as in text, not as integer
// nanoseconds.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// logFatal reports the error that ends serve once its logger exists, in
// the log's own format (a JSON line with --log-format json), and turns it
// into the exit status: 2 for a bad setting (an error that starts by
// naming its flag, "--redis-timeout must be positive"), 1 for anything
// else. nil and an exitCode (already reported) pass through.
func logFatal(log *slog.Logger, err error) error {
	if _, ok := errors.AsType[exitCode](err); err == nil || ok {
		return err
	}
	if strings.HasPrefix(err.Error(), "--") {
		log.Error("invalid setting; floodgate serve --help lists the flags", "err", err)
		return exitCode(2)
	}
	log.Error("floodgate serve stopped", "err", err)
	return exitCode(1)
}

// redisLogEvery is how often serve lets a go-redis log line through.
const redisLogEvery = time.Minute

// quietRedisLog is go-redis' process-wide logger in serve. The breaker
// logs an outage once; go-redis' line per failed dial is kept to one a
// minute, each saying how many it held back. A line is a WARN record with
// msg "go-redis" and go-redis' text in "log", so that it follows the
// server's format (--log-format json) instead of go-redis' plain
// "redis: …" lines on stderr.
type quietRedisLog struct {
	log   *slog.Logger
	now   func() time.Time
	every observability.LogLimiter
}

// Printf implements go-redis' logging interface.
func (q *quietRedisLog) Printf(ctx context.Context, format string, v ...any) {
	heldBack, ok := q.every.Allow(q.now(), redisLogEvery)
	if !ok {
		return
	}
	log := q.log
	if heldBack > 0 {
		log = log.With("held_back", heldBack)
	}
	log.WarnContext(ctx, "go-redis", "log", strings.TrimSpace(fmt.Sprintf(format, v...)))
}
